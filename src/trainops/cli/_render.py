"""What the CLI prints, as pure functions of API data: tables, the run summary, metrics CSV.

Nothing here talks to a server or prints; the commands fetch data and print these strings, and
the tests check the strings on hand-written data.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from trainops.client import format_time

# Spelled as escapes so the source stays ASCII; they print as the real signs.
TIMES = "\N{MULTIPLICATION SIGN}"
APPROX = "\N{ALMOST EQUAL TO}"

__all__ = [
    "format_cluster_table",
    "format_cost",
    "format_job_summary",
    "format_jobs_table",
    "format_metrics_csv",
    "format_metrics_table",
    "format_money",
    "format_rule_statuses",
    "format_table",
    "printable",
]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, no trailing blanks."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def format_jobs_table(jobs: Sequence[dict[str, Any]]) -> str:
    """The ``trainops jobs`` listing: name, status, secondary status, creation time, instances."""
    if not jobs:
        return "No jobs found."
    rows = [
        [
            str(job.get("TrainingJobName", "")),
            str(job.get("TrainingJobStatus", "")),
            str(job.get("SecondaryStatus", "")),
            format_time(job.get("CreationTime")),
            f"{job.get('InstanceType', '?')} {TIMES} {job.get('InstanceCount', '?')}",
        ]
        for job in jobs
    ]
    return format_table(["NAME", "STATUS", "SECONDARY", "CREATED", "INSTANCES"], rows)


def format_cluster_table(cluster: dict[str, Any]) -> str:
    """``trainops cluster``: each node of the backend, free of what it has."""
    rows = []
    for node in cluster.get("nodes") or []:
        have, free = node.get("capacity") or {}, node.get("free") or {}
        rows.append(
            [str(node.get("node", "?"))]
            + [f"{free.get(k, '?')}/{have.get(k, '?')}" for k in ("cpus", "memory_mb", "gpus")]
        )
    table = format_table(["NODE", "CPUS FREE", "MEMORY MB FREE", "GPUS FREE"], rows)
    return f"Backend: {cluster.get('backend', '?')}\n{table}"


def format_metrics_table(points: Sequence[dict[str, Any]]) -> str:
    """Metric points as an aligned table: time, metric, value, host."""
    rows = [
        [
            format_time(p.get("Timestamp")),
            str(p.get("MetricName", "")),
            _number(p.get("Value")),
            str(p.get("Host") or ""),
        ]
        for p in points
    ]
    return format_table(["TIMESTAMP", "METRIC", "VALUE", "HOST"], rows)


def format_metrics_csv(points: Sequence[dict[str, Any]]) -> str:
    """Metric points as CSV with the header ``timestamp,metric_name,value,host``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["timestamp", "metric_name", "value", "host"])
    for p in points:
        writer.writerow([p.get("Timestamp"), p.get("MetricName"), p.get("Value"), p.get("Host")])
    return out.getvalue()


def format_cost(description: dict[str, Any]) -> str | None:
    """``~ $0.0012 (ml.m5.large x 1 at $0.115/h, prices as of 2024-06-01)``; None without a cost.
    A spot job's starts with its cost at the spot price (``~ $0.0004 at spot ($0.0345/h, an
    estimate); on-demand ~ $0.0012 (...)``).

    Printed with the almost-equal and multiplication signs; None when the job has no cost yet.
    """
    cost = description.get("Cost")
    if not cost or cost.get("EstimatedCostUsd") is None:
        return None
    resources = description.get("ResourceConfig") or {}
    count = cost.get("InstanceCount", resources.get("InstanceCount", "?"))
    on_demand = (
        f"{APPROX} ${format_money(float(cost['EstimatedCostUsd']))} "
        f"({resources.get('InstanceType', '?')} {TIMES} {count} "
        f"at ${float(cost.get('OnDemandUsdPerHour', 0)):g}/h, "
        f"prices as of {cost.get('PricesAsOf', '?')})"
    )
    if not description.get("EnableManagedSpotTraining") or "EstimatedSpotCostUsd" not in cost:
        return on_demand
    kind = "your price" if cost.get("SpotPriceKind") == "yours" else "an estimate"
    return (
        f"{APPROX} ${format_money(float(cost['EstimatedSpotCostUsd']))} at spot "
        f"(${float(cost['SpotUsdPerHour']):g}/h, {kind}); on-demand {on_demand}"
    )


def format_job_summary(description: dict[str, Any]) -> str:
    """What ``trainops run`` prints when the job has ended."""
    lines = [f"Job {description.get('TrainingJobName')}: {description.get('TrainingJobStatus')}"]
    lines += _failure_reason(description.get("FailureReason"))
    lines += _section("Final metrics:", _metric_rows(description))
    lines += _section("Artifacts:", _artifact_rows(description))
    rules = format_rule_statuses(description)
    if rules is not None:
        lines.append(rules)
    lines.append(
        f"Time: training {_seconds(description.get('TrainingTimeInSeconds'))}, "
        f"billable {_seconds(description.get('BillableTimeInSeconds'))}"
    )
    lines += format_spot_lines(description)
    cost = format_cost(description)
    if cost is not None:
        lines.append(f"Cost: {cost}")
    return "\n".join(lines)


def format_spot_lines(description: dict[str, Any]) -> list[str]:
    """A spot job's lines as the SageMaker SDK prints them at its end (training and billable
    seconds, the savings), and its interruptions; none for an on-demand job."""
    if not description.get("EnableManagedSpotTraining"):
        return []
    lines = [
        f"Training seconds: {description.get('TrainingTimeInSeconds')}",
        f"Billable seconds: {description.get('BillableTimeInSeconds')}",
    ]
    savings = description.get("ManagedSpotTrainingSavings")
    if savings is not None:
        lines.append(f"Managed Spot Training savings: {float(savings):.1f}%")
    lines.append(f"Interruptions: {description.get('Interruptions', 0)}")
    return lines


def _failure_reason(reason: str | None) -> list[str]:
    """One line when it fits on one; otherwise a heading and the reason indented below it."""
    if not reason:
        return []
    parts = reason.strip().splitlines()
    if len(parts) == 1:
        return [f"Failure reason: {parts[0]}"]
    return ["Failure reason:", *(f"  {part}" for part in parts)]


def _section(title: str, rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    table = format_table([""] * len(rows[0]), rows).split("\n")[1:]
    return [title, *(f"  {line}" for line in table)]


def _metric_rows(description: dict[str, Any]) -> list[list[str]]:
    return [
        [str(m.get("MetricName", "")), _number(m.get("Value"))]
        for m in description.get("FinalMetricDataList") or []
    ]


def _artifact_rows(description: dict[str, Any]) -> list[list[str]]:
    rows = []
    for artifact in description.get("Artifacts") or []:
        label = str(artifact.get("Name", ""))
        if artifact.get("Host"):
            label = f"{label} ({artifact['Host']})"
        rows.append([label, str(artifact.get("Uri", ""))])
    return rows


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def format_money(usd: float) -> str:
    """Cents for big sums; otherwise enough decimals to show two significant digits (max 8)."""
    if usd >= 1:
        return f"{usd:,.2f}"
    decimals = 4
    while decimals < 8 and 0 < usd < 10 ** (1 - decimals):
        decimals += 1
    return f"{usd:.{decimals}f}"


def _seconds(value: Any) -> str:
    return "-" if value is None else f"{value} s"


def format_rule_statuses(description: dict[str, Any]) -> str | None:
    """The rules of a description (``ProfilerRuleEvaluationStatuses``, then
    ``DebugRuleEvaluationStatuses``): a line each (name, status, details), then for a rule that
    found issues its recommendation and what its actions did; None when the job has no rules."""
    blocks = [
        _rule_block(title, _statuses(description, key))
        for title, key in (
            ("Profiler rules:", "ProfilerRuleEvaluationStatuses"),
            ("Debugger rules:", "DebugRuleEvaluationStatuses"),
        )
    ]
    shown = [block for block in blocks if block]
    return "\n".join(shown) if shown else None


def _statuses(description: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The rule statuses at ``key``, each with its evaluation: in the REST describe it is the
    status's own ``Evaluation``; ``trainops describe`` prints it under ``Trainops`` (at the same
    path: a list of the same length)."""
    statuses = description.get(key) or []
    own = (description.get("Trainops") or {}).get(key) or []
    if len(own) != len(statuses):
        return list(statuses)
    return [status | part for status, part in zip(statuses, own, strict=True)]


def printable(text: Any) -> str:
    """``text`` with every character that is not printable written as its escape (``\\x1b``):
    what a job wrote (a tensor's name in a rule's details) cannot move the terminal's cursor or
    forge a line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _rule_block(title: str, statuses: list[dict[str, Any]]) -> str | None:
    if not statuses:
        return None
    lines = [title]
    for status in statuses:
        lines.append(
            f"  {printable(status.get('RuleConfigurationName', '?'))}: "
            f"{printable(status.get('RuleEvaluationStatus', '?'))}: "
            f"{printable(status.get('StatusDetails', ''))}"
        )
        evaluation = status.get("Evaluation") or {}
        if status.get("RuleEvaluationStatus") == "IssuesFound" and evaluation.get("Recommendation"):
            lines.append(f"    Recommendation: {printable(evaluation['Recommendation'])}")
        for action in evaluation.get("Actions") or []:
            outcome = "done" if action.get("Ok") else "failed"
            detail = printable(action.get("Detail"))
            lines.append(f"    Action {printable(action.get('Type'))} {outcome}: {detail}")
    return "\n".join(lines)
