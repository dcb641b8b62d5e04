"""The script of bench/log_throughput.py: prints N short lines that two metric definitions match.

It times itself from its first line to its last flush and appends its wall time and the moment
it finished (epoch seconds) as one JSON line to $BENCH_RESULT. With BENCH_HOSTILE=1 it also
writes a 10 MiB line, 1 MiB of random bytes and a last line without a newline.
"""

import json
import os
import random
import resource
import sys
import time

lines = int(os.environ.get("BENCH_LINES", "200000"))
started = time.perf_counter()
for step in range(lines):
    print(f"step {step} loss={1.0 / (step + 1):.6f} acc={step % 100 / 100:.2f}")
if os.environ.get("BENCH_HOSTILE") == "1":
    sys.stdout.flush()
    sys.stdout.buffer.write(b"x" * (10 * 1024 * 1024) + b"\n")
    sys.stdout.buffer.write(random.Random(0).randbytes(1024 * 1024) + b"\n")
    sys.stdout.buffer.write(b"the end, without a newline")
sys.stdout.flush()
wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
result = {
    "wall_s": wall,
    "finished_at": time.time(),
    "cpu_s": usage.ru_utime + usage.ru_stime,
    # Waits for the pipe (it was full) are voluntary switches; a busy CPU makes involuntary ones.
    "voluntary_switches": usage.ru_nvcsw,
    "involuntary_switches": usage.ru_nivcsw,
}
with open(os.environ["BENCH_RESULT"], "a", encoding="utf-8") as out:
    out.write(json.dumps(result) + "\n")
