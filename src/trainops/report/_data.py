"""The profiler report as data: one plain, JSON-serialisable dict, computed apart from rendering.

:func:`report_data` reads the job's record, its profiler series (a
:class:`~trainops.profiler.ProfilerReader` already refreshed), its rules' evaluations and the
instance catalog, and returns the sections of SageMaker's profiler report (reference/sagemaker.md
§6.2) plus the right-sizing advice. The HTML page (``_html``) and the web UI render this dict;
nothing here formats text for a screen. Every section has ``available``; one without data says
why in ``reason``. Times inside the sections are seconds from the job's start (``t0``), and
every timeline is downsampled to at most ``max_points`` points (min/max preserving).
"""

from __future__ import annotations

import time
from typing import Any

from trainops.catalog import load_catalog
from trainops.profiler import ProfilerReader, Series
from trainops.report._advice import advise
from trainops.report._columns import family, ordered_columns, unit_of
from trainops.report._context import ReportContext
from trainops.report._framework import framework_section, step_section, throughput
from trainops.report._sections import (
    batch_size_section,
    cpu_bottleneck_section,
    gpu_memory_section,
    gpu_utilization_section,
    io_bottleneck_section,
    load_balancing_section,
    rules_section,
)
from trainops.report._stats import describe_values, rounded
from trainops.store import JobRecord, RuleEvaluation, Transition

__all__ = ["REPORT_VERSION", "SECTIONS", "report_data"]

REPORT_VERSION = 1
#: The sections, in the order of SageMaker's report.
SECTIONS = (
    "summary",
    "system_usage",
    "framework",
    "rules",
    "step_durations",
    "gpu_utilization",
    "batch_size",
    "cpu_bottlenecks",
    "io_bottlenecks",
    "load_balancing",
    "gpu_memory",
)
ENDED = ("Completed", "Failed", "Stopped")
HEATMAP_BINS = 240


def report_data(
    job: JobRecord,
    transitions: list[Transition],
    reader: ProfilerReader,
    evaluations: list[RuleEvaluation],
    *,
    now: float | None = None,
    max_points: int = 2000,
) -> dict[str, Any]:
    """The whole report of ``job`` as plain data (see the module's docstring)."""
    now = time.time() if now is None else now
    t0 = job.training_start_time or job.creation_time
    systems = {key.host: s for key, s in reader.of_kind("system").items()}
    steps = {(key.host, key.rank or 0): s for key, s in reader.of_kind("steps").items()}
    loaders = {(key.host, key.rank or 0): s for key, s in reader.of_kind("dataloader").items()}
    context = ReportContext(job, t0, systems, steps, loaders, reader.meta, max_points)
    sections: dict[str, Any] = {
        "summary": _summary(job, transitions, steps, now),
        "system_usage": _system_usage(context),
        "framework": framework_section(steps),
        "rules": rules_section(job, evaluations),
        "step_durations": step_section(context),
        "gpu_utilization": gpu_utilization_section(context),
        "batch_size": batch_size_section(context),
        "cpu_bottlenecks": cpu_bottleneck_section(context),
        "io_bottlenecks": io_bottleneck_section(context),
        "load_balancing": load_balancing_section(context),
        "gpu_memory": gpu_memory_section(context),
    }
    data: dict[str, Any] = {
        "version": REPORT_VERSION,
        "generated_at": now,
        "job": _job(job, reader),
        "t0": t0,
        "hosts": {host: dict(meta) for host, meta in sorted(reader.meta.items())},
        "sections": sections,
        "timelines": _timelines(context),
        "heatmaps": _heatmaps(context),
        "throughput": throughput(context),
        "read_errors": list(reader.errors[:50]),
    }
    data["advice"] = advise(data, job.spec.instance_type, job.spec.instance_count, load_catalog())
    return data


def _job(job: JobRecord, reader: ProfilerReader) -> dict[str, Any]:
    spec = job.spec
    return {
        "name": job.name,
        "status": job.status,
        "secondary_status": job.secondary_status,
        "failure_reason": job.failure_reason,
        "instance_type": spec.instance_type,
        "instance_count": spec.instance_count,
        "running": job.status not in ENDED,
        "profiler_prefix": reader.prefix,
        "hyperparameters": {k: str(v)[:200] for k, v in sorted(spec.hyperparameters.items())},
    }


def _summary(
    job: JobRecord,
    transitions: list[Transition],
    steps: dict[tuple[str, int], Series],
    now: float,
) -> dict[str, Any]:
    start = job.training_start_time or job.creation_time
    end = job.training_end_time or (now if job.status not in ENDED else job.last_modified_time)
    found: dict[str, Any] = {
        "available": True,
        "start_time": start,
        "end_time": end,
        "ended": job.status in ENDED,
        "job_duration_in_seconds": rounded(max(0.0, end - start), 6),
        "transitions": [
            {
                "status": t.status,
                "start_time": t.start_time,
                "end_time": t.end_time,
                "message": t.message[:500],
            }
            for t in transitions
        ],
    }
    starts = [row[0] for s in steps.values() for row in s.rows]
    ends = [t + d for s in steps.values() for t, d in zip(s.times, s.column("duration"), strict=True) if d == d]  # fmt: skip
    if not starts or not ends:
        found["reason"] = "no step timings were recorded, so the training loop cannot be told"
        return found
    loop_start, loop_end = min(starts), max(ends)
    duration = max(end - start, 1e-9)
    parts = {
        "initialization_in_seconds": max(0.0, loop_start - start),
        "training_loop_duration_in_seconds": max(0.0, loop_end - loop_start),
        "finalization_in_seconds": max(0.0, end - loop_end),
    }
    found |= {"training_loop_start": loop_start, "training_loop_end": loop_end}
    found |= {key: rounded(value, 6) for key, value in parts.items()}
    found["split_percent"] = {
        "initialization": rounded(100 * parts["initialization_in_seconds"] / duration),
        "training_loop": rounded(100 * parts["training_loop_duration_in_seconds"] / duration),
        "finalization": rounded(100 * parts["finalization_in_seconds"] / duration),
    }
    return found


def _system_usage(context: ReportContext) -> dict[str, Any]:
    if not context.systems:
        return {"available": False, "reason": "no system metrics were recorded (no monitor ran)"}
    nodes = []
    for host, series in sorted(context.systems.items()):
        metrics = []
        for column in ordered_columns(series.columns):
            stats = describe_values(series.column(column))
            if stats is not None:
                metrics.append({"metric": column, "unit": unit_of(column), **stats})
        meta = context.meta.get(host, {})
        nodes.append(
            {
                "host": host,
                "samples": len(series),
                "interval_ms": meta.get("interval_ms", series.header.get("interval_ms")),
                "metrics": metrics,
            }
        )
    return {"available": True, "nodes": nodes}


def _timelines(context: ReportContext) -> dict[str, Any]:
    """Per host: whole-host lines (cpu, iowait, memory), per-core and per-GPU lines. Per-core
    lines get a quarter of ``max_points`` (the heatmap shows every core at once)."""
    found: dict[str, Any] = {}
    for host, series in sorted(context.systems.items()):
        columns = ordered_columns(series.columns)
        found[host] = {
            "host": {c: context.line(series, c) for c in ("cpu", "iowait", "memory") if c in columns},
            "cores": {c: context.line(series, c, max(50, context.max_points // 4))
                      for c in columns if family(c) == "cpu<N>"},
            "gpus": {c: context.line(series, c) for c in columns if family(c) == "gpu<N>"},
            "gpu_memory": {c: context.line(series, c)
                           for c in columns if family(c) == "gpu<N>_memory"},
        }  # fmt: skip
    return found


def _heatmaps(context: ReportContext) -> dict[str, Any]:
    """Per host: cores x time, each cell the mean utilization of a core over one time bin."""
    found: dict[str, Any] = {}
    for host, series in sorted(context.systems.items()):
        cores = [c for c in ordered_columns(series.columns) if family(c) == "cpu<N>"]
        times = context.relative(series)
        if not cores or not times:
            continue
        low, high = times[0], times[-1]
        bins = max(1, min(HEATMAP_BINS, len(times)))
        width = (high - low) / bins or 1.0
        rows = []
        for core in cores:
            sums, counts = [0.0] * bins, [0] * bins
            for t, v in zip(times, series.column(core), strict=True):
                if v == v:
                    index = min(int((t - low) / width), bins - 1)
                    sums[index] += v
                    counts[index] += 1
            rows.append(
                [rounded(s / n, 3) if n else None for s, n in zip(sums, counts, strict=True)]
            )
        found[host] = {
            "cores": cores,
            "start": round(low, 3),
            "bin_seconds": rounded(width),
            "values": rows,
        }
    return found
