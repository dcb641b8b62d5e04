"""Synthetic jobs for the report's tests: a job record in a real store and profiler data written
with the profiler's own :class:`SeriesWriter` under a ``file://`` prefix."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops._settings import Settings
from trainops.profiler import MODE_EVAL, MODE_TRAIN, STEP_COLUMNS, ProfilerReader, SeriesWriter
from trainops.profiler._layout import dataloader_dir, meta_path, steps_dir, system_dir
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore, RuleEvaluation

T0 = 1_750_000_000.0


@dataclass
class Profile:
    """Where profiler data is written (a profiler prefix's directory), and what was."""

    root: Path
    instance_type: str = "ml.m5.large"
    written: dict[str, list[tuple[float, ...]]] = field(default_factory=dict)


@dataclass(kw_only=True)
class Synthetic(Profile):
    """A job, its store and where its profiler data lies."""

    store: MetadataStore
    settings: Settings
    job: JobRecord

    @property
    def prefix(self) -> str:
        return self.root.as_uri()

    def reader(self) -> ProfilerReader:
        from trainops.storage import store_for

        reader = ProfilerReader(store_for(self.prefix, self.settings), self.prefix)
        reader.refresh()
        return reader


def make_job(
    tmp: Path,
    name: str = "synthetic-job",
    *,
    instance_type: str = "ml.m5.large",
    rules: Sequence[Any] = ("ProfilerReport",),
    hyperparameters: dict[str, Any] | None = None,
    status: str = "Completed",
    duration: float = 600.0,
) -> Synthetic:
    settings = Settings.load()
    store = MetadataStore(tmp / "trainops.db")
    output = (tmp / "out").as_uri()
    spec = JobSpec(
        entry_point="train.py",
        instance_type=instance_type,
        hyperparameters=hyperparameters or {},
        profiler_config={"system_monitor_interval_millis": 100},
        rules=list(rules),
    )
    store.create_job(
        name=name, spec=spec.view(), code_uri="file:///nowhere", output_prefix=f"{output}/{name}",
        max_attempts=1, status="InProgress", secondary_status="Starting", message="", now=T0 - 5,
    )  # fmt: skip
    fields: dict[str, Any] = {"training_start_time": T0}
    if status != "InProgress":
        fields |= {"status": status, "secondary_status": status, "training_end_time": T0 + duration}
    store.update_job(name, T0, **fields)
    job = store.get_job(name)
    assert job is not None
    root = tmp / "out" / name / "profiler-output"
    return Synthetic(root, instance_type, store=store, settings=settings, job=job)


def write_meta(syn: Profile, host: str = "algo-1", **meta: Any) -> None:
    path = syn.root / meta_path(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    base = {"host": host, "instance_type": syn.instance_type, "cores": 2,
            "memory_bytes": 8 << 30, "gpus": [], "gpu_status": "no NVIDIA GPU (NVML not found)",
            "interval_ms": 100, "attempt": 1, "started": T0}  # fmt: skip
    path.write_text(json.dumps(base | meta))


def write_series(
    syn: Synthetic,
    directory: Path,
    columns: Sequence[str],
    rows: Sequence[Sequence[float]],
    *,
    rotate_rows: int = 500,
    key: str | None = None,
) -> None:
    writer = SeriesWriter(syn.root / directory, {"kind": directory.parts[0]}, columns,
                          prefix="1-", rotate_rows=rotate_rows, rotate_seconds=1e9)  # fmt: skip
    for row in rows:
        writer.append(row)
    writer.close()
    syn.written[key or str(directory)] = [tuple(map(float, r)) for r in rows]


def system_rows(
    count: int,
    cores: int,
    cpu: Callable[[int, int], float],
    *,
    gpus: int = 0,
    gpu: Callable[[int, int], float] | None = None,
    gpu_memory: Callable[[int, int], float] | None = None,
    interval: float = 0.1,
    start: float = T0,
    memory: float = 30.0,
    iowait: float = 1.0,
) -> tuple[list[str], list[list[float]]]:
    """System rows: ``cpu(i, core)`` per core (the host column is their mean)."""
    columns = [
        "time",
        "cpu",
        *(f"cpu{c}" for c in range(cores)),
        "iowait",
        "memory",
        "memory_bytes",
    ]
    columns += [f"gpu{g}" for g in range(gpus)] + [f"gpu{g}_memory" for g in range(gpus)]
    rows = []
    for i in range(count):
        per_core = [cpu(i, c) for c in range(cores)]
        row = [
            start + i * interval,
            sum(per_core) / cores,
            *per_core,
            iowait,
            memory,
            memory / 100 * (8 << 30),
        ]
        row += [gpu(i, g) if gpu else 0.0 for g in range(gpus)]
        row += [gpu_memory(i, g) if gpu_memory else 10.0 for g in range(gpus)]
        rows.append(row)
    return columns, rows


def step_rows(
    count: int,
    *,
    start: float = T0 + 30,
    duration: Callable[[int], float] = lambda i: 0.1,
    samples: float = 32.0,
    evals: int = 0,
) -> tuple[list[str], list[list[float]]]:
    columns = list(STEP_COLUMNS)
    rows, t = [], start
    for i in range(count):
        d = duration(i)
        rows.append([t, i, MODE_TRAIN, d, d * 0.2, d * 0.3, d * 0.4, d * 0.05, samples])
        t += d + 0.001
    for i in range(evals):
        rows.append([t, i, MODE_EVAL, 0.05, 0.01, 0.03, math.nan, math.nan, samples])
        t += 0.051
    return columns, rows


def standard_job(tmp: Path, **kwargs: Any) -> Synthetic:
    """A CPU job on 2 cores: 6,000 system samples at about 50 %, 2,000 train steps, 20 eval."""
    syn = make_job(tmp, **kwargs)
    write_meta(syn)
    noise = random.Random(7)
    columns, rows = system_rows(
        6000, 2, lambda i, c: 50 + 30 * math.sin(i / 50 + c) + noise.random()
    )
    write_series(syn, system_dir("algo-1"), columns, rows, key="system")
    columns, rows = step_rows(
        2000, duration=lambda i: 0.25 if i % 100 == 99 else 0.1 + noise.random() * 0.01, evals=20
    )
    write_series(syn, steps_dir("algo-1", 0), columns, rows, key="steps")
    return syn


def record_rule(syn: Synthetic, name: str, status: str, **result: Any) -> None:
    syn.store.set_rule_evaluation(
        RuleEvaluation(
            syn.job.name, name, name, "profiler", status, f"{name} details", T0 + 600, result
        )
    )


__all__ = ["T0", "Profile", "Synthetic", "dataloader_dir", "make_job", "record_rule", "standard_job",
           "step_rows", "steps_dir", "system_dir", "system_rows", "write_meta", "write_series"]  # fmt: skip
