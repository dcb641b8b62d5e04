"""CPUBottleneck and IOBottleneck: GPUs wait while the CPU is busy, or while the host waits on I/O.

Over the snapshots after ``patience``: the share (percent) of snapshots in which some GPU is
below ``gpu_threshold`` while the CPU is above ``cpu_threshold`` (CPUBottleneck) or I/O wait is
above ``io_threshold`` (IOBottleneck) must not exceed ``threshold``.
"""

from __future__ import annotations

import math
from abc import abstractmethod

from trainops.rules._base import ISSUES_FOUND, NO_ISSUES_FOUND, RuleResult
from trainops.rules._stats import SystemTable, fmt, percentile
from trainops.rules._system import SystemRule

__all__ = ["CPUBottleneck", "IOBottleneck"]


class _Bottleneck(SystemRule):
    #: The parameter of the busy side's threshold, and what it measures.
    limit_key: str
    what: str
    label: str
    advice: str

    @abstractmethod
    def busy(self, table: SystemTable) -> list[float]:
        """Per snapshot, the busy side's value (CPU percent, or I/O wait percent)."""

    def _host(self, host: str, table: SystemTable) -> RuleResult:
        gpu_limit, limit = self.number("gpu_threshold"), self.number(self.limit_key)
        columns = [table.get(c) for c in table.gpus.values()]
        busy = self.busy(table)
        total = hits = 0
        for load, *gpus in zip(busy, *columns, strict=False):
            lowest = min((g for g in gpus if g == g), default=math.nan)
            if lowest != lowest or load != load:
                continue  # a snapshot without a GPU value or the busy side's value
            total += 1
            hits += lowest < gpu_limit and load > limit
        share = 100.0 * hits / total if total else 0.0
        evidence = {
            "snapshots": total,
            "bottlenecks": hits,
            "percent": share,
            f"{self.what}_p50": percentile(busy, 50),
        }
        line = (
            f"{fmt(share)} % of {total} snapshots had a GPU below {gpu_limit:g} % while "
            f"{self.label} was above {limit:g} % ({hits} snapshots)"
        )
        if share <= self.number("threshold"):
            return RuleResult(NO_ISSUES_FOUND, line, "", evidence)
        details = f"{line}: more than {self.number('threshold'):g} %"
        return RuleResult(ISSUES_FOUND, details, self.advice, evidence)


class CPUBottleneck(_Bottleneck):
    name = "CPUBottleneck"
    limit_key = "cpu_threshold"
    what = "cpu"
    label = "CPU"
    advice = (
        "The GPUs wait on the CPU: move preprocessing to the GPU or do it once ahead of training, "
        "raise DataLoader num_workers towards the core count, or choose an instance type with "
        "more vCPUs per GPU."
    )

    def busy(self, table: SystemTable) -> list[float]:
        return table.cpu


class IOBottleneck(_Bottleneck):
    name = "IOBottleneck"
    limit_key = "io_threshold"
    what = "iowait"
    label = "I/O wait"
    advice = (
        "The GPUs wait on storage: copy the data to local disk first or stream it (FastFile or "
        "Pipe input), pack small files into larger shards, and prefetch batches (DataLoader "
        "prefetch_factor, more workers)."
    )

    def busy(self, table: SystemTable) -> list[float]:
        return table.get("iowait")
