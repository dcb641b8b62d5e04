"""The framework sections of the report: where the training loop's time goes, and step durations.

Both read the step series (``framework/steps/<host>/rank-<r>/``): one row per step with its
start, duration, mode (train or eval) and phases (data, forward, backward, optimizer). A rank's
training loop runs from its first step's start to its last step's end; time in it outside any
step is "other" (evaluation loops without step timing, checkpointing, logging).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from trainops.profiler import MODE_EVAL, MODE_TRAIN, Series
from trainops.report._context import ReportContext
from trainops.report._stats import describe_values, downsample, histogram, rounded

__all__ = ["PHASES", "framework_section", "rank_rows", "step_section", "throughput"]

PHASES = ("data", "forward", "backward", "optimizer")
_EPOCH_KEYS = ("epochs", "num_epochs", "num-epochs", "n_epochs", "epoch")
PER_STEPS = 1000
_NO_STEPS = (
    "no step timings were recorded: the script's loop was not seen by trainops.profiler "
    "(no optimizer step hook fired and no step() was called)"
)


def rank_rows(series: Series, mode: float) -> list[dict[str, float]]:
    """The steps of one rank in ``mode``, each as ``{column: value}``."""
    columns = series.columns
    rows = [dict(zip(columns, row, strict=True)) for row in series.rows]
    return [row for row in rows if row.get("mode", MODE_TRAIN) == mode]


def framework_section(steps: dict[tuple[str, int], Series]) -> dict[str, Any]:
    """Train and eval time against the rest of the loop, and each phase's share of train steps."""
    if not steps:
        return {"available": False, "reason": _NO_STEPS}
    ranks = [_rank_split(host, rank, series) for (host, rank), series in sorted(steps.items())]
    totals = {key: math.fsum(r[key] for r in ranks) for key in ("train", "eval", "other", "loop")}
    phases = {p: math.fsum(r["phases"][p] for r in ranks) for p in (*PHASES, "other")}
    train = totals["train"] or 1e-12
    loop = totals["loop"] or 1e-12
    return {
        "available": True,
        "ranks": ranks,
        "seconds": {k: rounded(v) for k, v in totals.items()},
        "percent_of_loop": {k: rounded(100 * totals[k] / loop) for k in ("train", "eval", "other")},
        "phase_seconds": {k: rounded(v) for k, v in phases.items()},
        "phase_percent_of_train": {k: rounded(100 * v / train) for k, v in phases.items()},
        "phases_seen": [p for p in PHASES if any(r["phases"][p] > 0 for r in ranks)],
    }


def _rank_split(host: str, rank: int, series: Series) -> dict[str, Any]:
    train, evals = rank_rows(series, MODE_TRAIN), rank_rows(series, MODE_EVAL)
    every = train + evals
    first = min(row["time"] for row in every)
    last = max(row["time"] + _seconds(row, "duration") for row in every)
    train_s = math.fsum(_seconds(row, "duration") for row in train)
    eval_s = math.fsum(_seconds(row, "duration") for row in evals)
    phases = {p: math.fsum(_seconds(row, p) for row in train) for p in PHASES}
    phases["other"] = max(0.0, train_s - math.fsum(phases.values()))
    return {
        "host": host,
        "rank": rank,
        "train_steps": len(train),
        "eval_steps": len(evals),
        "train": train_s,
        "eval": eval_s,
        "loop": max(0.0, last - first),
        "other": max(0.0, (last - first) - train_s - eval_s),
        "phases": phases,
        "samples_per_step": _median([row.get("samples", math.nan) for row in train]),
    }


def step_section(context: ReportContext) -> dict[str, Any]:
    """Per rank: statistics, a histogram and a timeline of step durations, and outliers as
    StepOutlier counts them (longer than mean + ``stddev`` standard deviations)."""
    if not context.steps:
        return {"available": False, "reason": _NO_STEPS}
    stddev = float(context.rule_parameter("StepOutlier", "stddev"))
    ranks = []
    for (host, rank), series in sorted(context.steps.items()):
        entry: dict[str, Any] = {"host": host, "rank": rank}
        for name, mode in (("train", MODE_TRAIN), ("eval", MODE_EVAL)):
            rows = rank_rows(series, mode)
            if rows:
                entry[name] = _durations(context, rows, stddev)
        ranks.append(entry)
    return {"available": True, "stddev": stddev, "ranks": ranks}


def _durations(
    context: ReportContext, rows: list[dict[str, float]], stddev: float
) -> dict[str, Any]:
    times = [row["time"] - context.t0 for row in rows]
    durations = [_seconds(row, "duration", math.nan) for row in rows]
    stats = describe_values(durations) or {}
    finite = [d for d in durations if not math.isnan(d)]
    deviation = statistics.pstdev(finite) if len(finite) > 1 else 0.0
    limit = stats.get("mean", 0.0) + stddev * deviation
    outliers = [
        [round(t, 3), rounded(d)] for t, d in zip(times, durations, strict=True) if d > limit
    ]
    return {
        "stats": stats | {"std": rounded(deviation)},
        "histogram": histogram(durations),
        "timeline": downsample(times, durations, context.max_points),
        "outlier_limit": rounded(limit),
        "outliers": len(outliers),
        "outlier_points": outliers[:200],
        "steps_per_second": rounded(len(finite) / math.fsum(finite)) if math.fsum(finite) else 0.0,
    }


def _seconds(row: dict[str, float], key: str, missing: float = 0.0) -> float:
    value = row.get(key, math.nan)
    return missing if math.isnan(value) else value


def _median(values: list[float]) -> float | None:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else None


def throughput(context: ReportContext) -> dict[str, Any]:
    """Seconds per training step (the slowest rank's loop time outside evaluation over its train
    steps) and the unit of work the advice prices: an epoch where its length in steps is known,
    else 1,000 steps."""
    if not context.steps:
        return {}
    per_rank = []
    for series in context.steps.values():
        train, evals = rank_rows(series, MODE_TRAIN), rank_rows(series, MODE_EVAL)
        every = train + evals
        if not train:
            continue
        loop = max(r["time"] + _seconds(r, "duration") for r in every) - min(
            r["time"] for r in every
        )
        busy = loop - math.fsum(_seconds(r, "duration") for r in evals)
        per_rank.append((max(busy, 0.0) / len(train), len(train)))
    if not per_rank:
        return {}
    seconds, steps = max(per_rank)
    found = {"seconds_per_step": rounded(seconds), "train_steps": steps}
    epoch = _steps_per_epoch(context, steps)
    if epoch is None:
        return found | {"unit": f"{PER_STEPS:,} steps", "steps_per_unit": PER_STEPS,
                        "source": "the epoch length is not known from the data"}  # fmt: skip
    return found | {"unit": "epoch", "steps_per_unit": epoch[0], "source": epoch[1]}


def _steps_per_epoch(context: ReportContext, steps: int) -> tuple[int, str] | None:
    for series in context.loaders.values():
        batches = [b for b in series.column("batch") if not math.isnan(b)]
        restarts = [i for i in range(1, len(batches)) if batches[i] < batches[i - 1]]
        if restarts:
            length = int(max(batches[: restarts[0]]) + 1)
            return length, f"the dataloader's batch index restarts after {length} batches"
    if context.job.status != "Completed":
        return None
    for key in _EPOCH_KEYS:
        try:
            epochs = int(float(context.job.spec.hyperparameters[key]))
        except (KeyError, ValueError):
            continue
        if epochs > 0 and steps >= epochs:
            return (
                steps // epochs,
                f"{steps} train steps over {epochs} epochs, hyperparameter {key}",
            )
    return None
