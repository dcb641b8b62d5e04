"""LoadBalancing: the GPUs of a node work unevenly.

Per node with two GPUs or more, on the snapshots after ``patience``: each GPU's utilization is
binned in 10 %-wide bins, and the rule fires when the Jensen-Shannon distance (base 2, 0 for
the same histogram, 1 for disjoint ones) between two GPUs' histograms exceeds ``threshold``.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

from trainops.rules._base import ISSUES_FOUND, NO_ISSUES_FOUND, RuleResult
from trainops.rules._stats import SystemTable, finite, fmt, mean
from trainops.rules._system import SystemRule

__all__ = ["LoadBalancing", "histogram", "js_distance"]

BINS = 10


def histogram(values: list[float], bins: int = BINS) -> list[float]:
    """Shares of ``values`` (0-100) in ``bins`` equal bins; 100 falls in the last."""
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, max(0, int(value * bins / 100.0)))] += 1
    total = sum(counts) or 1
    return [c / total for c in counts]


def js_distance(p: list[float], q: list[float]) -> float:
    """Jensen-Shannon distance of two distributions, base 2 (between 0 and 1)."""
    middle = [(a + b) / 2 for a, b in zip(p, q, strict=True)]

    def divergence(x: list[float]) -> float:
        return sum(a * math.log2(a / m) for a, m in zip(x, middle, strict=True) if a > 0)

    return math.sqrt(max(0.0, (divergence(p) + divergence(q)) / 2))


class LoadBalancing(SystemRule):
    name = "LoadBalancing"

    def _host(self, host: str, table: SystemTable) -> RuleResult:
        gpus = {c: finite(table.get(c)) for c in table.gpus.values()}
        means = {c: mean(v) for c, v in gpus.items()}
        if len(gpus) < 2:
            line = "one GPU: nothing to balance"
            return RuleResult(NO_ISSUES_FOUND, line, "", {"gpus": len(gpus), "mean": means})
        shapes = {c: histogram(v) for c, v in gpus.items()}
        pairs = [(js_distance(shapes[a], shapes[b]), a, b) for a, b in combinations(shapes, 2)]
        distance, first, second = max(pairs)
        evidence: dict[str, Any] = {"gpus": len(gpus), "distance": distance, "mean": means}
        evidence["pair"] = [first, second]
        line = (
            f"largest Jensen-Shannon distance {distance:.2f} between {first} "
            f"(mean {fmt(means[first])} %) and {second} (mean {fmt(means[second])} %)"
        )
        if distance <= self.number("threshold"):
            return RuleResult(NO_ISSUES_FOUND, line, "", evidence)
        advice = (
            f"{first} and {second} are used unevenly: check that every GPU gets the same share "
            "of the batch (DistributedSampler, equal shard sizes) and that no rank does extra "
            "work (logging, evaluation, checkpointing) inside the step."
        )
        return RuleResult(ISSUES_FOUND, f"{line} > {self.number('threshold'):g}", advice, evidence)
