"""The system sections of the report (GPU utilization, batch size, CPU and I/O bottlenecks, load
balancing, GPU memory) and the rules summary.

Each follows the SageMaker rule of the same name (reference/sagemaker.md §6.2) with the job's
parameters, and shows the figures that rule looks at, so a reader can see why it fired or not.
The rules' verdicts themselves come from the store (evaluated live by the rules service).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from typing import Any

from trainops.profiler import Series
from trainops.report._columns import gpu_indices
from trainops.report._context import ReportContext
from trainops.report._framework import rank_rows
from trainops.report._stats import describe_values, finite, js_distance, percentile, rounded
from trainops.spec import PROFILER_RULES
from trainops.store import JobRecord, RuleEvaluation

__all__ = [
    "batch_size_section",
    "cpu_bottleneck_section",
    "gpu_memory_section",
    "gpu_utilization_section",
    "io_bottleneck_section",
    "load_balancing_section",
    "rules_section",
]

_NO_SYSTEM = "no system metrics were recorded (no monitor ran)"
_MAX_EVIDENCE = 4000


def _no_gpu(context: ReportContext, host: str) -> str:
    status = context.meta.get(host, {}).get("gpu_status")
    return f"no GPU on {host}" + (f" ({status})" if status and status != "nvml" else "")


def _p(values: list[float], q: float) -> float | None:
    data = sorted(finite(values))
    return rounded(percentile(data, q)) if data else None


def gpu_utilization_section(context: ReportContext) -> dict[str, Any]:
    """Per GPU: utilization statistics, and LowGPUUtilization's verdict on them."""
    if not context.systems:
        return {"available": False, "reason": _NO_SYSTEM}
    p95_limit = float(context.rule_parameter("LowGPUUtilization", "threshold_p95"))
    p5_limit = float(context.rule_parameter("LowGPUUtilization", "threshold_p5"))
    gpus, missing = [], []
    for host, series in sorted(context.systems.items()):
        indices = gpu_indices(series.columns)
        if not indices:
            missing.append(_no_gpu(context, host))
        for index in indices:
            values = series.column(f"gpu{index}")
            stats = describe_values(values)
            if stats is None:
                continue
            p5 = _p(values, 5) or 0.0
            verdict = "underused" if stats["p95"] < p95_limit else "ok"
            if stats["p95"] >= p95_limit and p5 < p5_limit:
                verdict = "fluctuating"
            gpus.append({"host": host, "gpu": index, **stats, "p5": p5, "verdict": verdict})
    found: dict[str, Any] = {"threshold_p95": p95_limit, "threshold_p5": p5_limit, "gpus": gpus}
    if not gpus:
        return found | {"available": False, "reason": "; ".join(missing)}
    return found | {"available": True, "without_gpu": missing}


def _thresholds(context: ReportContext, rule: str, *keys: str) -> dict[str, float]:
    """The rule's parameters ``keys`` as numbers, in that order (as the report shows them)."""
    return {key: float(context.rule_parameter(rule, key)) for key in keys}


def batch_size_section(context: ReportContext) -> dict[str, Any]:
    """BatchSize's three p95 figures per node, and the samples per step each rank saw."""
    if not context.systems:
        return {"available": False, "reason": _NO_SYSTEM}
    limits = _thresholds(
        context, "BatchSize", "cpu_threshold_p95", "gpu_threshold_p95", "gpu_memory_threshold_p95"
    )
    nodes = []
    for host, series in sorted(context.systems.items()):
        cpu = _p(series.column("cpu"), 95)
        gpus = []
        for index in gpu_indices(series.columns):
            util, memory = (
                _p(series.column(f"gpu{index}"), 95),
                _p(series.column(f"gpu{index}_memory"), 95),
            )
            small = (
                cpu is not None and cpu < limits["cpu_threshold_p95"]
                and util is not None and util < limits["gpu_threshold_p95"]
                and (memory is None or memory < limits["gpu_memory_threshold_p95"])
            )  # fmt: skip
            gpus.append({"gpu": index, "p95": util, "memory_p95": memory, "could_grow": small})
        node: dict[str, Any] = {"host": host, "cpu_p95": cpu, "gpus": gpus}
        if not gpus:
            node["note"] = (
                _no_gpu(context, host) + ": BatchSize looks at GPUs; CPU shown for the advice"
            )
        nodes.append(node)
    samples = [
        {"host": host, "rank": rank, "samples_per_step": _median([r.get("samples", math.nan) for r in rank_rows(s, 0.0)])}
        for (host, rank), s in sorted(context.steps.items())
    ]  # fmt: skip
    return {"available": True, "thresholds": limits, "nodes": nodes, "ranks": samples}


def cpu_bottleneck_section(context: ReportContext) -> dict[str, Any]:
    """CPUBottleneck's share of samples with the CPU busy (and a GPU idle), and the
    dataloader's workers against the cores."""
    if not context.systems:
        return {"available": False, "reason": _NO_SYSTEM}
    limits = _thresholds(context, "CPUBottleneck", "cpu_threshold", "gpu_threshold", "threshold")
    cpu_limit, gpu_limit, share_limit = limits.values()
    nodes = []
    for host, series in sorted(context.systems.items()):
        busy = [v > cpu_limit for v in series.column("cpu")]
        idle = _gpu_idle(series, gpu_limit)
        both = [b and i for b, i in zip(busy, idle, strict=True)] if idle else []
        node = {"host": host, "samples": len(busy), "cpu_busy_percent": _share(busy)}
        if idle:
            node |= {"bottleneck_percent": _share(both), "found": _share(both) > share_limit}
        else:
            node["note"] = _no_gpu(context, host) + ": the CPU's busy share is shown alone"
        nodes.append(node)
    return {
        "available": True,
        "thresholds": limits,
        "nodes": nodes,
        "dataloader": _dataloader(context),
    }


def io_bottleneck_section(context: ReportContext) -> dict[str, Any]:
    """IOBottleneck's share of samples with high I/O wait (and a GPU idle), with disk figures."""
    if not context.systems:
        return {"available": False, "reason": _NO_SYSTEM}
    limits = _thresholds(context, "IOBottleneck", "io_threshold", "gpu_threshold", "threshold")
    io_limit, gpu_limit, share_limit = limits.values()
    nodes = []
    for host, series in sorted(context.systems.items()):
        waiting = [v > io_limit for v in series.column("iowait")]
        idle = _gpu_idle(series, gpu_limit)
        node: dict[str, Any] = {
            "host": host,
            "iowait_p95": _p(series.column("iowait"), 95),
            "disk_read_p95": _p(series.column("disk_read"), 95),
            "disk_write_p95": _p(series.column("disk_write"), 95),
            "iowait_high_percent": _share(waiting),
        }
        if idle and waiting:
            both = [w and i for w, i in zip(waiting, idle, strict=True)]
            node |= {"bottleneck_percent": _share(both), "found": _share(both) > share_limit}
        elif not idle:
            node["note"] = _no_gpu(context, host) + ": the I/O wait share is shown alone"
        nodes.append(node)
    return {"available": True, "thresholds": limits, "nodes": nodes}


def load_balancing_section(context: ReportContext) -> dict[str, Any]:
    """LoadBalancing's Jensen-Shannon distance between each pair of a node's GPUs, and how even
    the ranks' median train step durations are."""
    limit = float(context.rule_parameter("LoadBalancing", "threshold"))
    pairs = []
    for host, series in sorted(context.systems.items()):
        for a, b in itertools.combinations(gpu_indices(series.columns), 2):
            distance = js_distance(series.column(f"gpu{a}"), series.column(f"gpu{b}"))
            pairs.append(
                {
                    "host": host,
                    "gpus": [a, b],
                    "distance": rounded(distance),
                    "found": distance > limit,
                }
            )
    ranks: list[dict[str, Any]] = []
    medians: list[float] = []
    for (host, rank), series in sorted(context.steps.items()):
        median = _median([r.get("duration", math.nan) for r in rank_rows(series, 0.0)])
        if median is not None:
            ranks.append({"host": host, "rank": rank, "median_step": median})
            medians.append(median)
    if not pairs and len(ranks) < 2:
        return {
            "available": False,
            "reason": "one GPU or none per node and one rank: nothing to balance",
        }
    spread = rounded(max(medians) / min(medians)) if len(medians) > 1 and min(medians) > 0 else None
    return {
        "available": True,
        "threshold": limit,
        "gpu_pairs": pairs,
        "ranks": ranks,
        "slowest_over_fastest": spread,
    }


def gpu_memory_section(context: ReportContext) -> dict[str, Any]:
    """Per GPU: memory statistics and the largest rise of its moving average (GPUMemoryIncrease)."""
    if not context.systems:
        return {"available": False, "reason": _NO_SYSTEM}
    window = int(context.rule_parameter("GPUMemoryIncrease", "window"))
    increase = float(context.rule_parameter("GPUMemoryIncrease", "increase"))
    gpus, missing = [], []
    for host, series in sorted(context.systems.items()):
        indices = [i for i in gpu_indices(series.columns) if f"gpu{i}_memory" in series.columns]
        if not indices:
            missing.append(_no_gpu(context, host))
        for index in indices:
            values = finite(series.column(f"gpu{index}_memory"))
            stats = describe_values(values)
            if stats is None:
                continue
            rise = _largest_rise(values, window)
            gpus.append(
                {
                    "host": host,
                    "gpu": index,
                    **stats,
                    "rise": rounded(rise),
                    "found": rise > increase,
                }
            )
    found: dict[str, Any] = {"window": window, "increase": increase, "gpus": gpus}
    if not gpus:
        return found | {"available": False, "reason": "; ".join(missing) or _NO_SYSTEM}
    return found | {"available": True}


def rules_section(job: JobRecord, evaluations: list[RuleEvaluation]) -> dict[str, Any]:
    """Each rule with its status, details, recommendation and evidence, as the rules service
    recorded them; ProfilerReport's members (its evidence's ``rules``) each get their own row
    under it, and a configured rule without a record yet is listed as not evaluated."""
    configured = [(rule.name, rule.rule) for rule in job.spec.profiler_rules]
    if not configured and not evaluations:
        return {
            "available": False,
            "reason": "the job configured no rules (add `rules: [ProfilerReport]` to its spec)",
        }
    rows = [row for e in evaluations for row in _rule_rows(e)]
    seen = {row["name"] for row in rows}
    for name, rule in configured:
        if name not in seen:
            rows.append(_row(name, rule, "NotEvaluated", "no evaluation recorded yet", {}))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    final = all(row["status"] not in ("InProgress", "NotEvaluated") for row in rows)
    return {"available": True, "rules": rows, "status_counts": counts, "final": final}


def _rule_rows(evaluation: RuleEvaluation) -> list[dict[str, Any]]:
    """The row of one evaluation, then its members' rows (ProfilerReport). The stored result is
    ``{"result": {status, details, recommendation, evidence}, "found", "found_time",
    "evaluations", ...}`` (trainops.rules); a flat ``{recommendation, evidence}`` is read too."""
    body: dict[str, Any] = evaluation.result if isinstance(evaluation.result, dict) else {}
    inner = body.get("result")
    verdict: dict[str, Any] = inner if isinstance(inner, dict) else body
    evidence = verdict.get("evidence")
    members: dict[str, Any] = {}
    shown = evidence
    if isinstance(evidence, dict) and isinstance(evidence.get("rules"), dict):
        members = evidence["rules"]
        shown = {k: v for k, v in evidence.items() if k != "rules"}
    row = _row(
        evaluation.name,
        evaluation.rule,
        evaluation.status,
        evaluation.status_details,
        verdict,
        shown,
    )
    row |= {"last_modified_time": evaluation.last_modified_time, "evaluations": body.get("evaluations"),
            "found_time": body.get("found_time")}  # fmt: skip
    if isinstance(body.get("triggered"), int | float):
        row["triggered"] = int(body["triggered"])
    rows = [row]
    for member, result in members.items():
        if isinstance(result, dict):
            status = str(result.get("status", ""))
            rows.append(
                _row(str(member), str(member), status, str(result.get("details", "")), result)
                | {"member_of": evaluation.name}
            )
    return rows


def _row(
    name: str, rule: str, status: str, details: str, verdict: dict[str, Any], evidence: Any = None
) -> dict[str, Any]:
    evidence = verdict.get("evidence", "") if evidence is None else evidence
    text = (
        evidence if isinstance(evidence, str) else json.dumps(evidence, sort_keys=True, default=str)
    )
    return {
        "name": name,
        "rule": rule,
        "status": status,
        "details": details[:2000],
        "description": _summary_of(rule),
        "recommendation": str(verdict.get("recommendation") or "")[:2000],
        "evidence": "" if text in ("{}", "null") else text[:_MAX_EVIDENCE],
        "triggered": int(status == "IssuesFound"),
    }


def _summary_of(rule: str) -> str:
    definition = PROFILER_RULES.get(rule)
    return definition.summary if definition else ""


def _dataloader(context: ReportContext) -> dict[str, Any]:
    if not context.loaders:
        return {
            "available": False,
            "reason": "no dataloader was seen (the script iterated no DataLoader, or ran unprofiled)",
        }
    ranks = []
    for (host, rank), series in sorted(context.loaders.items()):
        cores = context.meta.get(host, {}).get("cores")
        # As the Dataloader rule counts: the rank's busiest loader (an evaluation loader with
        # no workers beside it must not lower the count); fetch times of batches only (a row
        # with no batch index is an iterator's start, its workers starting).
        workers = max(finite(series.column("workers")), default=None)
        batches = series.column("batch")
        fetch = [f for f, b in zip(series.column("fetch"), batches, strict=True) if b == b]
        ranks.append({"host": host, "rank": rank, "workers": workers, "cores": cores,
                      "fetch": describe_values(fetch)})  # fmt: skip
    return {"available": True, "ranks": ranks}


def _gpu_idle(series: Series, limit: float) -> list[bool]:
    """Per sample: any GPU below ``limit`` (empty without GPUs)."""
    columns = [series.column(f"gpu{i}") for i in gpu_indices(series.columns)]
    if not columns:
        return []
    return [any(v < limit for v in values) for values in zip(*columns, strict=True)]


def _share(flags: list[bool]) -> float:
    return rounded(100.0 * sum(flags) / len(flags)) if flags else 0.0


def _median(values: list[float]) -> float | None:
    data = finite(values)
    return rounded(statistics.median(data)) if data else None


def _largest_rise(values: list[float], window: int) -> float:
    """The largest rise of the ``window``-point moving average over any earlier low."""
    if len(values) < window or window < 1:
        return 0.0
    moving = [math.fsum(values[i : i + window]) / window for i in range(len(values) - window + 1)]
    low, rise = moving[0], 0.0
    for value in moving:
        low = min(low, value)
        rise = max(rise, value - low)
    return rise
