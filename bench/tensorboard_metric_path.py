"""The TensorBoard sidecar's metric path: CPU seconds to write and sync 400,000 scraped points.

What ``--observe`` in bench/log_throughput.py puts after the script's exit, measured alone and
in CPU time (``time.process_time``), so that a loaded machine does not blur it: scraped points
come in batches (the log scanner hands a listener each metric's values of a group of lines) and
are written as TensorBoard scalars, the writer is closed and the folder synced to a ``file://``
prefix once. Two paths, interleaved for ``--rounds`` rounds at each batch size:

- ``per point``: ``SummaryWriter.add_scalar`` for each point (the sidecar's path before), and a
  sync that reads every record's header to find where the whole records end;
- ``batched``: ``SummaryWriter.add_scalars`` for each batch (one template per tag, framed
  together) and a sync that takes the writer's own files' length (``EventSync.vouch``).

Both write the same bytes (tests/tensorboard checks it). Results go to
bench/results/tensorboard_metric_path.json.

    python bench/tensorboard_metric_path.py [--points 400000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import machine, versions, write_json

from trainops._settings import Settings
from trainops.storage import store_for
from trainops.tensorboard import EventSync, SummaryWriter

BENCH = Path(__file__).resolve().parent
TAGS = ("loss", "acc")
BATCHES = (1, 16, 256)


def one_run(points: int, batch: int, batched: bool, workdir: Path) -> dict[str, float]:
    """CPU seconds to write ``points`` (half per tag) in batches of ``batch``, then close and
    sync once."""
    local, remote = workdir / "tb", (workdir / "remote").as_uri()
    sync = EventSync(local, remote, store_for(remote, Settings(home=workdir / "home")))
    writer = SummaryWriter(local / "trainops", flush_secs=5.0)
    values = [0.25] * batch
    start = time.process_time()
    for first in range(0, points // len(TAGS), batch):
        for tag in TAGS:
            if batched:
                writer.add_scalars(tag, values, first, 1_700_000_000.0)
            else:
                for offset, value in enumerate(values):
                    writer.add_scalar(tag, value, first + offset, 1_700_000_000.0)
    written = time.process_time()
    writer.close()
    if batched:
        sync.vouch(writer.file_writer.whole_files())
    sync.sync_once(final=True)
    end = time.process_time()
    shutil.rmtree(workdir / "tb"), shutil.rmtree(workdir / "remote")
    return {"write_s": written - start, "close_and_sync_s": end - written, "total_s": end - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=BENCH / "results" / "tensorboard_metric_path.json"
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="tob-tb-"))
    samples: dict[str, list[dict[str, float]]] = {}
    try:
        for round_ in range(args.rounds):
            for batch in BATCHES:
                for batched in (False, True):
                    key = f"{'batched' if batched else 'per point'}, batch {batch}"
                    sample = one_run(args.points, batch, batched, workdir)
                    samples.setdefault(key, []).append(sample)
                    print(f"round {round_} {key}: {sample['total_s']:.3f} s CPU", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {
        key: {part: statistics.median(s[part] for s in runs) for part in runs[0]}
        for key, runs in samples.items()
    }
    result: dict[str, Any] = {
        "benchmark": "tensorboard_metric_path",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "points": args.points,
        "rounds": args.rounds,
        "machine": machine(),
        "versions": versions(),
        "samples": samples,
        "median_cpu_s": medians,
    }
    write_json(result, args.out)
    print("| path | write (CPU s) | close + sync (CPU s) | total (CPU s) | µs a point |")
    print("|---|---:|---:|---:|---:|")
    for key, m in medians.items():
        per_point = m["total_s"] / args.points * 1e6
        print(
            f"| {key} | {m['write_s']:.3f} | {m['close_and_sync_s']:.3f} | {m['total_s']:.3f} | {per_point:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
