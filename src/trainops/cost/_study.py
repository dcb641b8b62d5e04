"""The figures of a scaling study: throughput, time to target, scaling efficiency, cost.

Throughput is the median of the job's throughput metric (samples per second over all ranks),
leaving out its first point (start-up and warm-up). Scaling efficiency compares each
configuration with perfect scaling of the smallest one: ``throughput / (world x throughput of
the smallest world / its world size)``, so 1.0 means every added process added its full share.
Cost is the job's billable time at the catalog price of its instances.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StudyRow", "StudyRun", "plot_study", "render_study", "scaling_rows", "throughput_of",
           "time_to_target"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class StudyRun:
    """One configuration's job, as it ended."""

    label: str
    instance_type: str
    instance_count: int
    processes_per_host: int
    job_name: str
    status: str
    throughput: float | None
    time_to_target_s: float | None
    billable_seconds: int | None
    cost_usd: float | None

    @property
    def world(self) -> int:
        return self.instance_count * self.processes_per_host


@dataclass(frozen=True, slots=True)
class StudyRow:
    run: StudyRun
    efficiency: float | None


def throughput_of(values: Sequence[float]) -> float | None:
    """The steady rate: the median of the points after the first (all of them if only one)."""
    kept = list(values[1:]) if len(values) > 1 else list(values)
    return statistics.median(kept) if kept else None


def time_to_target(
    points: Sequence[tuple[float, float]], start: float, value: float, *, maximize: bool = True
) -> float | None:
    """Seconds from ``start`` to the first ``(timestamp, value)`` at or past ``value``."""
    for ts, found in sorted(points):
        if (found >= value) if maximize else (found <= value):
            return max(0.0, ts - start)
    return None


def scaling_rows(runs: Sequence[StudyRun]) -> list[StudyRow]:
    """Each run with its scaling efficiency against the smallest measured world."""
    measured = [r for r in runs if r.throughput]
    if not measured:
        return [StudyRow(r, None) for r in runs]
    base = min(measured, key=lambda r: r.world)
    per_process = (base.throughput or 0.0) / base.world
    return [
        StudyRow(r, r.throughput / (r.world * per_process) if r.throughput else None) for r in runs
    ]


def render_study(rows: Sequence[StudyRow], target: str | None) -> str:
    """A plain-text table, one configuration per line."""
    header = ["configuration", "world", "samples/s", "efficiency", f"time to {target or '-'}",
              "billable", "cost (USD)", "status"]  # fmt: skip
    table = [header]
    for row in rows:
        run = row.run
        table.append(
            [
                run.label,
                str(run.world),
                _fmt(run.throughput, "{:.0f}"),
                _fmt(row.efficiency, "{:.0%}"),
                _fmt(run.time_to_target_s, "{:.1f} s"),
                _fmt(run.billable_seconds, "{} s"),
                _fmt(run.cost_usd, "{:.6f}"),
                run.status,
            ]
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i in (0, 7) else cell.rjust(w) for i, (cell, w) in
                  enumerate(zip(line, widths, strict=True))).rstrip()
        for line in table
    )  # fmt: skip


def plot_study(rows: Sequence[StudyRow], path: Path, title: str) -> Path:
    """Throughput against world size, next to perfect scaling of the smallest world (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "the scaling plot needs matplotlib: pip install 'trainops[plot]'"
        ) from None
    measured = sorted((r for r in rows if r.run.throughput), key=lambda r: r.run.world)
    figure, axes = plt.subplots(figsize=(6, 4), dpi=100)
    if measured:
        base = measured[0].run
        per_process = (base.throughput or 0.0) / base.world
        worlds = sorted({r.run.world for r in measured})
        axes.plot(worlds, [w * per_process for w in worlds], "--", color="grey", label="perfect")
        axes.set_xticks(worlds)
        for row in measured:
            run = row.run
            axes.plot(run.world, run.throughput or 0.0, "o")
            axes.annotate(_annotation(row), (run.world, run.throughput or 0.0), fontsize=8,
                          textcoords="offset points", xytext=(4, 4))  # fmt: skip
    axes.set_xlabel("processes (hosts x processes per host)")
    axes.set_ylabel("samples / s")
    axes.set_title(title, fontsize=10)
    if measured:
        axes.legend(loc="upper left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def _annotation(row: StudyRow) -> str:
    run = row.run
    return f"{run.instance_count}x{run.processes_per_host} {_fmt(row.efficiency, '{:.0%}')}"


def _fmt(value: Any, form: str) -> str:
    return "-" if value is None else form.format(value)
