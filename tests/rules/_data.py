"""Synthetic profiler data for the rule tests: a healthy job, and one job per rule built to trip it.

Every builder returns a :class:`ProfilerData` made of real :class:`Series` (the reader's own
type), seeded so the numbers are the same on every run. Times start at ``T0``; the system
monitor samples every 0.5 s, as SageMaker's default.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from trainops.profiler import MODE_EVAL, MODE_TRAIN, Series
from trainops.rules import ProfilerData

T0 = 1_700_000_000.0
INTERVAL = 0.5
SNAPSHOTS = 1200  # more than every rule's default patience (1000)
HOST = "algo-1"
CORES = 8

Column = Callable[[int, random.Random], float]


def noisy(centre: float, spread: float = 2.0) -> Column:
    return lambda i, rng: min(100.0, max(0.0, centre + rng.uniform(-spread, spread)))


def system_series(
    columns: dict[str, Column], n: int = SNAPSHOTS, seed: int = 1, start: float = T0
) -> Series:
    rng = random.Random(seed)
    names = ["time", *columns]
    rows = [(start + i * INTERVAL, *(make(i, rng) for make in columns.values())) for i in range(n)]
    return Series(names, rows, {"kind": "system"})


def healthy_system(n: int = SNAPSHOTS, gpus: int = 2) -> dict[str, Column]:
    columns: dict[str, Column] = {"cpu": noisy(60), "iowait": noisy(2, 1), "memory": noisy(40)}
    columns |= {f"cpu{i}": noisy(60, 10) for i in range(CORES)}
    for g in range(gpus):
        columns[f"gpu{g}"] = noisy(90, 4)
        columns[f"gpu{g}_memory"] = noisy(78, 1)
        columns[f"gpu{g}_memory_bytes"] = lambda i, rng: 12e9
    columns |= {"disk_read": noisy(50, 5), "net_rx": noisy(10, 1)}
    return columns


def step_series(
    durations: Sequence[float],
    *,
    mode: float = MODE_TRAIN,
    start: float = T0 + 5.0,
    samples: float = 64.0,
) -> Series:
    rows: list[tuple[float, ...]] = []
    now = start
    for number, duration in enumerate(durations):
        data, forward = duration * 0.2, duration * 0.3
        backward, optimizer = duration * 0.4, duration * 0.05
        rows.append(
            (now, float(number), mode, duration, data, forward, backward, optimizer, samples)
        )
        now += duration
    columns = ["time", "step", "mode", "duration", "data", "forward", "backward", "optimizer"]
    return Series([*columns, "samples"], rows, {"kind": "steps"})


def steady_steps(n: int = 400, seed: int = 2, mean: float = 0.1) -> list[float]:
    rng = random.Random(seed)
    return [mean * rng.uniform(0.95, 1.05) for _ in range(n)]


def dataloader_series(workers: int, n: int = 30, start: float = T0 + 5.0) -> Series:
    rows: list[tuple[float, ...]] = [
        (start + i * 0.1, 0.01 + 0.001 * (i % 3), float(workers), float(i), float(i))
        for i in range(n)
    ]
    return Series(["time", "fetch", "workers", "batch", "step"], rows, {"kind": "dataloader"})


def meta(cores: int = CORES, gpus: int = 2) -> dict[str, Any]:
    return {
        "host": HOST,
        "instance_type": "ml.g5.2xlarge",
        "cores": cores,
        "memory_bytes": 32 * 2**30,
        "gpus": [{"index": g, "name": "A10G", "memory_bytes": 24 * 2**30} for g in range(gpus)],
        "gpu_status": "nvml" if gpus else "no NVIDIA driver",
        "interval_ms": 500,
        "attempt": 1,
        "started": T0,
    }


def job(
    system: dict[str, Column] | None = None,
    *,
    n: int = SNAPSHOTS,
    steps: Series | None = None,
    eval_steps: Series | None = None,
    loader: Series | None = None,
    cores: int = CORES,
    gpus: int = 2,
    ended: bool = True,
) -> ProfilerData:
    """One host's data; defaults are the healthy job's."""
    columns = healthy_system(n, gpus) if system is None else system
    series_steps = {(HOST, 0): steps if steps is not None else step_series(steady_steps())}
    if eval_steps is not None:
        series_steps[(HOST, 1)] = eval_steps
    end = T0 + n * INTERVAL
    return ProfilerData(
        system={HOST: system_series(columns, n)},
        steps=series_steps,
        dataloader={(HOST, 0): loader if loader is not None else dataloader_series(6)},
        meta={HOST: meta(cores, gpus)},
        job_start=T0,
        job_end=end if ended else None,
        now=end,
    )


def healthy() -> ProfilerData:
    return job()


def with_columns(**changes: Column) -> dict[str, Column]:
    return healthy_system() | changes


def rising(start: float, end: float, n: int = SNAPSHOTS) -> Column:
    return lambda i, rng: start + (end - start) * i / max(1, n - 1)


def alternating(high: float, low: float) -> Column:
    return lambda i, rng: high if i % 2 else low


def outlier_steps(n: int = 300, outliers: int = 15, every: int = 20) -> list[float]:
    durations = steady_steps(n)
    for k in range(outliers):
        durations[(k + 1) * every % n] = 1.0
    return durations


def trigger(rule: str) -> ProfilerData:
    """Data built to make ``rule`` find issues at its default parameters."""
    return TRIGGERS[rule]()


TRIGGERS: dict[str, Callable[[], ProfilerData]] = {
    "BatchSize": lambda: job(
        with_columns(
            cpu=noisy(20),
            gpu0=noisy(30),
            gpu0_memory=noisy(20),
            gpu1=noisy(30),
            gpu1_memory=noisy(20),
        )
    ),
    "CPUBottleneck": lambda: job(with_columns(cpu=noisy(96, 2), gpu0=noisy(4, 3))),
    "IOBottleneck": lambda: job(with_columns(iowait=noisy(70, 5), gpu1=noisy(4, 3))),
    "GPUMemoryIncrease": lambda: job(with_columns(gpu0_memory=rising(20, 60))),
    "LoadBalancing": lambda: job(with_columns(gpu1=noisy(20, 5))),
    "LowGPUUtilization": lambda: job(with_columns(gpu0=noisy(30, 5))),
    "MaxInitializationTime": lambda: job(steps=step_series(steady_steps(), start=T0 + 25 * 60)),
    "StepOutlier": lambda: job(steps=step_series(outlier_steps())),
    "Dataloader": lambda: job(loader=dataloader_series(32)),
    "ProfilerReport": lambda: job(steps=step_series(outlier_steps())),
}
#: Rules that report and never fire.
NEVER_FIRE = frozenset({"OverallSystemUsage", "OverallFrameworkMetrics"})


def fluctuating() -> ProfilerData:
    return job(with_columns(gpu0=alternating(98, 2)))


def eval_outliers() -> ProfilerData:
    return job(eval_steps=step_series(outlier_steps(), mode=MODE_EVAL))


def no_gpu() -> ProfilerData:
    columns = {k: v for k, v in healthy_system().items() if not k.startswith("gpu")}
    return job(columns, gpus=0)


def empty(ended: bool = False) -> ProfilerData:
    return ProfilerData(job_start=T0, job_end=T0 + 10 if ended else None, now=T0 + 10)
