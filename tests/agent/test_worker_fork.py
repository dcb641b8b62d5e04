"""The job's first metric worker, forked ahead while the agent has one thread (``_worker_fork``):
it scans as the script-started worker does, keeps nothing of the agent's but its pipes, ends on
the signals that end a worker, and a worker needed later is started as a script again.

Each case runs in a fresh interpreter: the fork is only made in a process with a single thread
(which pytest's need not be), and nothing forked may outlive the case."""

from __future__ import annotations

import subprocess
import sys

CATASTROPHIC = r"(a+)+$"

PRELUDE = """
import os, signal, sys, threading, time
from trainops.agent.reporting._metrics import MetricScanner, MetricScraper
from trainops.agent.reporting._scrape_worker import read_frame, write_frame
from trainops.agent.reporting._worker_fork import ForkedWorker, fork_spare, take_spare

def wait_for(get):
    deadline = time.monotonic() + 30
    while (value := get()) is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return value
"""

SCANS_THEN_RESTARTS_AS_A_SCRIPT = (
    PRELUDE
    + """
assert fork_spare()
found, warnings = [], []
scraper = MetricScraper([("slow", sys.argv[1]), ("loss", r"loss=([0-9.]+)")])
scanner = MetricScanner(scraper, lambda *p: found.append(p), warnings.append, budget_seconds=0.5)
first = wait_for(lambda: scanner._worker)._proc
scanner.submit(["loss=1", "a" * 40 + "!", "loss=2"], 10.0)
scanner.submit(["loss=3"], 11.0)
assert scanner.drain(timeout=30)
later = scanner._worker._proc
scanner.close()
print(type(first).__name__, first.returncode is not None, type(later).__name__)
print(found)
print(len(warnings), "'slow' is disabled" in warnings[0])
"""
)

KEEPS_ONLY_ITS_PIPES = (
    PRELUDE
    + """
signal.signal(signal.SIGTERM, lambda *a: None)  # the agent's own handler
extra = os.pipe()  # a descriptor of the agent's that the worker must not hold
assert fork_spare()
spare = take_spare()
write_frame(spare.stdin, b'[["loss", "loss=([0-9.]+)"]]')
write_frame(spare.stdin, b"loss=1")
assert read_frame(spare.stdout)  # it serves: past what it does before
links = {os.readlink(f"/proc/{spare.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{spare.pid}/fd")}
theirs = {os.readlink(f"/proc/self/fd/{fd}") for fd in extra}
# stdin/stdout/stderr on /dev/null, its two pipes, the progress file (and mmap's copy of it)
print(os.devnull in links, not theirs & links, len(links) == 4)
os.kill(spare.pid, signal.SIGTERM)
print(spare.wait() == -signal.SIGTERM)
threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
print(fork_spare(), take_spare())  # a process with threads forks none
"""
)


def _run(script: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_forked_worker_scans_and_a_restart_is_a_script() -> None:
    kinds, found, warned = _run(SCANS_THEN_RESTARTS_AS_A_SCRIPT, CATASTROPHIC)
    # The forked one was killed for the runaway regex; the next one is a fresh Python.
    assert kinds == "ForkedWorker True Popen"
    assert found == "[('loss', 10.0, [1.0, 2.0]), ('loss', 11.0, [3.0])]"
    assert warned == "1 True"


def test_the_forked_worker_keeps_only_its_pipes_and_dies_of_sigterm() -> None:
    fds, killed, threaded = _run(KEEPS_ONLY_ITS_PIPES)
    assert fds == "True True True"
    assert killed == "True"
    assert threaded == "False None"
