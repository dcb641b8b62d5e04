"""Debugger trial read throughput: steps per second read back from file:// and from S3.

A job's saved tensors are written once with ``TensorFileWriter`` (``--steps`` steps, each with
``--tensors`` float32 tensors of ``--elements`` elements and one scalar loss, and a reduction
per tensor), copied to a loopback SeaweedFS (the one the tests start), and read back by a fresh
trial per round, the schemes interleaved (file, s3, file, s3, ...):

- **index**: ``create_trial`` and ``steps()``: every index file listed and loaded;
- **values**: then every tensor's value at every step (what a rule over all of them reads).

Reported: the median over ``--rounds`` of steps per second for each, and MB/s of tensor bytes
for the values.

    python bench/debugger_trial_read.py [--rounds 3] [--steps 200] [--tensors 10] [--elements 4096]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _storage_bench import BENCH, header, publish, seaweed

from trainops.debugger import CollectionManager, create_trial, modes
from trainops.debugger.format import TensorFileWriter, mark_training_end, reduction_tensor_name
from trainops.storage import store_for, upload_tree


def write_trial(out: Path, steps: int, tensors: int, elements: int) -> int:
    """Write the trial; returns the tensor bytes of one step."""
    writer = TensorFileWriter(out, "worker_0", sync=False)
    writer.write_collections(CollectionManager())
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(elements).astype(np.float32) for _ in range(tensors)]
    for step in range(steps):
        saved: list[tuple[str, np.ndarray]] = [("loss", np.float32(1.0 / (step + 1)))]
        for i, value in enumerate(values):
            saved.append((f"layer{i}.weight", value))
            saved.append((reduction_tensor_name(f"layer{i}.weight", "l2", False), np.float32(1)))
        writer.write_step(step, modes.TRAIN, step, saved)
    mark_training_end(out)
    return tensors * elements * 4


def read_once(location: str, settings: Any) -> tuple[float, float, int]:
    """Seconds to load the index, seconds to read every value, and the steps seen."""
    start = time.perf_counter()
    trial = create_trial(location, settings=settings)
    steps = trial.steps()
    loaded = time.perf_counter()
    names = trial.tensor_names()
    for step in steps:
        for name in names:
            trial.tensor(name).value(step)
    return loaded - start, time.perf_counter() - loaded, len(steps)


def table(result: dict[str, Any]) -> str:
    rows = ["| scheme | index: steps/s | values: steps/s | values: MB/s |", "|---|---:|---:|---:|"]
    for scheme, figures in result["median"].items():
        rows.append(
            f"| {scheme}:// | {figures['index_steps_per_s']:,.0f} | "
            f"{figures['value_steps_per_s']:,.0f} | {figures['value_mb_per_s']:,.1f} |"
        )
    args = result["args"]
    rows.append("")
    rows.append(
        f"Measured {result['date']}: {args['steps']} steps of {args['tensors']} float32 tensors of "
        f"{args['elements']} elements (+ a reduction each and a loss), median of {args['rounds']} "
        f"interleaved rounds, one process, on {result['machine']['cpu_model']} "
        f"({result['machine']['usable_cores']} usable cores, shared: load average "
        f"{result['load_average']:.1f} when it ended). Raw samples: "
        "[results/debugger_trial_read.json](results/debugger_trial_read.json)."
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--tensors", type=int, default=10)
    parser.add_argument("--elements", type=int, default=4096)
    args = parser.parse_args()
    result = header("debugger_trial_read", vars(args))
    with tempfile.TemporaryDirectory() as work, seaweed(Path(work) / "seaweed") as server:
        local = Path(work) / "tensors"
        step_bytes = write_trial(local, args.steps, args.tensors, args.elements)
        settings = server.settings(Path(work) / "home")
        prefix = f"s3://{server.create_bucket()}/job/debug-output"
        upload_tree(store_for(prefix, settings), local, prefix)
        samples: dict[str, list[tuple[float, float, int]]] = {"file": [], "s3": []}
        for _ in range(args.rounds):
            samples["file"].append(read_once(str(local), settings))
            samples["s3"].append(read_once(prefix, settings))
    result["samples"] = samples
    result["load_average"] = os.getloadavg()[0]
    result["median"] = {
        scheme: {
            "index_steps_per_s": statistics.median(n / i for i, _, n in runs),
            "value_steps_per_s": statistics.median(n / v for _, v, n in runs),
            "value_mb_per_s": statistics.median(n * step_bytes / v / 1e6 for _, v, n in runs),
        }
        for scheme, runs in samples.items()
    }
    publish(
        result,
        BENCH / "results" / "debugger_trial_read.json",
        BENCH / "README.md",
        "debugger_trial_read",
        table(result),
    )


if __name__ == "__main__":
    main()
