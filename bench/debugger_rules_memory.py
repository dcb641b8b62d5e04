"""Debugger rules' memory: what a job that writes many tensors makes the control plane hold.

A job's debugger rules are evaluated by the control plane (the ``debugger-rules`` service) over
a trial on the job's debug-output prefix; the trial keeps track of every tensor record it holds.
Here a job (real files in smdebug's layout, written as a live job uploads them) writes
``--steps`` steps of ``--tensors`` small tensors each, ``--per-tick`` steps between two ticks of
the service's rules (VanishingGradient, LossNotDecreasing, WeightUpdateRatio and
StalledTrainingRule on a real store), and the process's resident memory (RSS, from
``/proc/self/statm``) is taken after each tick. Figures: the RSS before the first tick, its
peak, and the growth per million records the job wrote.

    python bench/debugger_rules_memory.py [--steps 200] [--tensors 2000] [--per-tick 10]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from trainops._settings import Settings
from trainops.control.services import ServiceContext
from trainops.debugger import Collection, CollectionManager, ModeKeys
from trainops.debugger.format import TensorFileWriter, mark_training_end
from trainops.rules._tracking import JobRules
from trainops.spec import JobSpec
from trainops.store import MetadataStore

_PAGE = os.sysconf("SC_PAGE_SIZE")
_RULES = ["VanishingGradient", "LossNotDecreasing", "WeightUpdateRatio", "StalledTrainingRule"]


def rss_mb() -> float:
    """The process's resident memory now, in MB."""
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 1e6


def _job(store: MetadataStore, output: str) -> Any:
    return store.create_job(
        name="job-a",
        spec=JobSpec(entry_point="train.py", rules=_RULES).view(),
        code_uri="file:///code.tar.gz",
        output_prefix=output,
        max_attempts=1,
        status="InProgress",
        secondary_status="Training",
        message="training",
        now=time.time(),
    )


def run(steps: int, tensors: int, per_tick: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = MetadataStore(root / "trainops.db")
        context = ServiceContext(store, Settings.load(), lambda *_: True, time.time)
        job = _job(store, (root / "out" / "job-a").as_uri())
        writer = TensorFileWriter(root / "out" / "job-a" / "debug-output", "worker_0", sync=False)
        writer.write_collections(CollectionManager([Collection("gradients", ["^g/.*"])]), 1)
        rules = JobRules(job, context, kind="debugger")
        base, peak, ticks = rss_mb(), 0.0, []
        names = [f"layer{i}.weight" for i in range(tensors)]
        for start in range(0, steps, per_tick):
            for step in range(start, min(start + per_tick, steps)):
                values = [(n, np.full(4, step, np.float32)) for n in names]
                writer.write_step(step, ModeKeys.TRAIN, step, values)
            rules.scan(job)
            now = rss_mb()
            peak = max(peak, now)
            ticks.append(round(now - base, 1))
        mark_training_end(root / "out" / "job-a" / "debug-output")
        rules.close()
        store.close()
    records = steps * tensors
    return {
        "steps": steps,
        "tensors_per_step": tensors,
        "records": records,
        "rss_before_mb": round(base, 1),
        "rss_peak_mb": round(peak, 1),
        "growth_mb": round(peak - base, 1),
        "growth_mb_per_million_records": round((peak - base) / records * 1e6, 1),
        "growth_after_each_tick_mb": ticks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--tensors", type=int, default=2000)
    parser.add_argument("--per-tick", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(run(args.steps, args.tensors, args.per_tick), indent=1))


if __name__ == "__main__":
    main()
