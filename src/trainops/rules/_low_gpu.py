"""LowGPUUtilization: a GPU is underused, or its use swings between busy and idle.

Per GPU, over the last ``window`` snapshots after ``patience``: p95 < ``threshold_p95``
(underused), or p95 > ``threshold_p95`` and p5 < ``threshold_p5`` (fluctuating).
"""

from __future__ import annotations

from typing import Any

from trainops.rules._base import ISSUES_FOUND, NO_ISSUES_FOUND, RuleResult
from trainops.rules._stats import SystemTable, fmt, percentile
from trainops.rules._system import SystemRule

__all__ = ["LowGPUUtilization"]


class LowGPUUtilization(SystemRule):
    name = "LowGPUUtilization"

    def _host(self, host: str, table: SystemTable) -> RuleResult:
        recent = table.tail(0, self.whole("window"))
        high, low = self.number("threshold_p95"), self.number("threshold_p5")
        evidence: dict[str, Any] = {"snapshots": len(recent)}
        under, swinging = [], []
        for column in recent.gpus.values():
            p95, p5 = percentile(recent.get(column), 95), percentile(recent.get(column), 5)
            evidence[column] = {"p95": p95, "p5": p5}
            if p95 < high:
                under.append(column)
            elif p5 < low:
                swinging.append(column)
        shown = ", ".join(
            f"{c} p95 {fmt(v['p95'])} %" for c, v in evidence.items() if c != "snapshots"
        )
        if under:
            seen = evidence[under[0]]
            details = f"{under[0]} p95 utilization {fmt(seen['p95'])} % < {high:g} %" + (
                f" ({len(under)} GPUs)" if len(under) > 1 else ""
            )
            advice = (
                f"{under[0]} p95 utilization {fmt(seen['p95'])} % < {high:g} %: increase the "
                "batch size, or use a smaller instance type (fewer or smaller GPUs)."
            )
            return RuleResult(ISSUES_FOUND, details, advice, evidence)
        if swinging:
            seen = evidence[swinging[0]]
            details = (
                f"{swinging[0]} fluctuates: p95 {fmt(seen['p95'])} % but p5 {fmt(seen['p5'])} % "
                f"< {low:g} %"
            )
            advice = (
                f"{swinging[0]} idles between bursts (p5 {fmt(seen['p5'])} %): the step waits on "
                "something else; look for a data-loading bottleneck (more DataLoader workers, "
                "pin_memory, prefetching) or blocking synchronisation (.item(), .cpu()) in the loop."
            )
            return RuleResult(ISSUES_FOUND, details, advice, evidence)
        return RuleResult(NO_ISSUES_FOUND, shown, "", evidence)
