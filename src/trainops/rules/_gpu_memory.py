"""GPUMemoryIncrease: a GPU's memory use keeps growing.

Per GPU, on the snapshots after ``patience``: the moving average of memory used (percent) over
``window`` snapshots; the rule fires when it rises more than ``increase`` points above the lowest
moving average seen before.
"""

from __future__ import annotations

from typing import Any

from trainops.rules._base import IN_PROGRESS, ISSUES_FOUND, NO_ISSUES_FOUND, RuleResult
from trainops.rules._stats import SystemTable, finite, fmt
from trainops.rules._system import SystemRule

__all__ = ["GPUMemoryIncrease", "largest_rise"]


def largest_rise(values: list[float], window: int) -> tuple[float, float, float]:
    """(rise, from, to): the largest rise of the ``window``-point moving average above its
    lowest earlier value; (0, first, first) for a flat or falling series."""
    window = max(1, window)
    total = sum(values[:window])
    low = best_from = best_to = total / window
    rise = 0.0
    for i in range(window, len(values) + 1):
        if i > window:
            total += values[i - 1] - values[i - 1 - window]
        average = total / window
        if average - low > rise:
            rise, best_from, best_to = average - low, low, average
        low = min(low, average)
    return rise, best_from, best_to


class GPUMemoryIncrease(SystemRule):
    name = "GPUMemoryIncrease"

    def _host(self, host: str, table: SystemTable) -> RuleResult:
        window, limit = self.whole("window"), self.number("increase")
        evidence: dict[str, Any] = {}
        worst: tuple[float, str] | None = None
        for index in table.gpus:
            values = finite(table.gpu_memory(index))
            if len(values) < window:
                continue
            rise, start, end = largest_rise(values, window)
            column = f"gpu{index}"
            evidence[column] = {"rise": rise, "from": start, "to": end, "last": values[-1]}
            if worst is None or rise > worst[0]:
                worst = (rise, column)
        if worst is None:
            return RuleResult(
                IN_PROGRESS, f"fewer than window={window} GPU memory samples so far", "", {}
            )
        rise, column = worst
        seen = evidence[column]
        line = (
            f"{column} memory's {window}-point moving average rose {fmt(rise)} points "
            f"({fmt(seen['from'])} % to {fmt(seen['to'])} %)"
        )
        if rise <= limit:
            return RuleResult(NO_ISSUES_FOUND, line, "", evidence)
        advice = (
            f"GPU memory grew by {fmt(rise)} points of its total: look for tensors kept across "
            "steps (a loss summed without .item(), growing lists of outputs, caches), or the job "
            "will run out of GPU memory; a GPU with more memory only delays it."
        )
        return RuleResult(ISSUES_FOUND, f"{line}, more than {limit:g}", advice, evidence)
