"""BatchSize: CPU, GPU and GPU memory all low on a node, so the batch size could be larger.

Per node, over the last ``window`` snapshots after ``patience``: CPU p95 <
``cpu_threshold_p95`` and, for some GPU, utilization p95 < ``gpu_threshold_p95`` and memory p95 <
``gpu_memory_threshold_p95``.
"""

from __future__ import annotations

from typing import Any

from trainops.rules._base import ISSUES_FOUND, NO_ISSUES_FOUND, RuleResult
from trainops.rules._stats import SystemTable, fmt, percentile
from trainops.rules._system import SystemRule

__all__ = ["BatchSize"]


class BatchSize(SystemRule):
    name = "BatchSize"

    def _host(self, host: str, table: SystemTable) -> RuleResult:
        recent = table.tail(0, self.whole("window"))
        cpu_p95 = percentile(recent.cpu, 95)
        gpus: dict[str, Any] = {}
        small = []
        for index, column in recent.gpus.items():
            util, memory = (
                percentile(recent.get(column), 95),
                percentile(recent.gpu_memory(index), 95),
            )
            gpus[column] = {"utilization_p95": util, "memory_p95": memory}
            if util < self.number("gpu_threshold_p95") and memory < self.number(
                "gpu_memory_threshold_p95"
            ):
                small.append(column)
        evidence = {"snapshots": len(recent), "cpu_p95": cpu_p95, "gpus": gpus}
        cpu_low = cpu_p95 < self.number("cpu_threshold_p95")
        if not (cpu_low and small):
            line = f"CPU p95 {fmt(cpu_p95)} %, " + ", ".join(
                f"{c} p95 {fmt(v['utilization_p95'])} % (memory {fmt(v['memory_p95'])} %)"
                for c, v in gpus.items()
            )
            return RuleResult(NO_ISSUES_FOUND, line, "", evidence)
        first = gpus[small[0]]
        details = (
            f"CPU p95 {fmt(cpu_p95)} % < {self.number('cpu_threshold_p95'):g} % and "
            f"{small[0]} p95 {fmt(first['utilization_p95'])} % < "
            f"{self.number('gpu_threshold_p95'):g} %, memory p95 {fmt(first['memory_p95'])} % < "
            f"{self.number('gpu_memory_threshold_p95'):g} %"
            + (f" ({len(small)} GPUs)" if len(small) > 1 else "")
        )
        advice = (
            f"The GPU is underused and has memory to spare ({fmt(first['memory_p95'])} % used at "
            "p95): increase the batch size (and scale the learning rate with it), or choose a "
            "smaller, cheaper instance type."
        )
        return RuleResult(ISSUES_FOUND, details, advice, evidence)
