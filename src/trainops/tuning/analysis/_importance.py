"""Parameter importance: how much of the objective's spread each tuned parameter explains alone.

The method (deterministic, no model fitted): over the Completed trials (their objectives are
measured at the full budget, so they compare), group the trials by the parameter, by its value
for a categorical range, else into ``round(sqrt(n))`` groups of consecutive values of near-equal
size (at least 2), sorted by value and then trial number. A parameter explains the share of the
objective's variance between its groups: the adjusted correlation ratio
``epsilon^2 = (SS_between - (k - 1) * MS_within) / SS_total``, clipped at 0 (adjusted so that a
parameter with no effect scores about 0 however many groups it has). The importances are these
shares normalised to sum to 1. Like fANOVA's main effects it ignores interactions; unlike fANOVA
it fits no forest, so the same trials always give the same figures. With few trials it is a hint.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainops.tuning._records import TunedValue

__all__ = ["MIN_TRIALS", "Importance", "explained_share", "importances"]

#: Fewer Completed trials than this give no importance (nothing to compare).
MIN_TRIALS = 3


@dataclass(frozen=True)
class Importance:
    """One parameter's importance (shares sum to 1) and the variance share it explains alone."""

    parameter: str
    importance: float
    explained: float


def _groups(
    values: Sequence[TunedValue], objectives: Sequence[float], categorical: bool
) -> list[list[float]]:
    if categorical:
        by_value: dict[str, list[float]] = {}
        for value, objective in zip(values, objectives, strict=True):
            by_value.setdefault(str(value), []).append(objective)
        return [by_value[key] for key in sorted(by_value)]
    order = sorted(range(len(values)), key=lambda i: (float(values[i]), i))
    count = max(2, round(math.sqrt(len(order))))
    n = len(order)
    return [
        [objectives[i] for i in order[n * g // count : n * (g + 1) // count]] for g in range(count)
    ]


def explained_share(groups: Sequence[Sequence[float]]) -> float:
    """Adjusted correlation ratio of ``groups`` of objective values (0 when nothing varies)."""
    groups = [g for g in groups if g]
    every = [v for g in groups for v in g]
    n, k = len(every), len(groups)
    if k < 2 or n <= k:
        return 0.0
    mean = statistics.fmean(every)
    total = sum((v - mean) ** 2 for v in every)
    if total <= 0.0:
        return 0.0
    between = sum(len(g) * (statistics.fmean(g) - mean) ** 2 for g in groups)
    within = (total - between) / (n - k)
    return max(0.0, (between - (k - 1) * within) / total)


def importances(
    columns: Mapping[str, tuple[Sequence[TunedValue], bool]], objectives: Sequence[float]
) -> list[Importance]:
    """Each parameter's importance, most important first (ties by name).

    ``columns`` maps a parameter to its values (one per objective) and whether it is categorical.
    """
    if len(objectives) < MIN_TRIALS:
        return []
    shares = {
        name: explained_share(_groups(values, objectives, categorical))
        for name, (values, categorical) in columns.items()
    }
    total = sum(shares.values())
    found = [
        Importance(name, share / total if total > 0 else 0.0, share)
        for name, share in shares.items()
    ]
    return sorted(found, key=lambda i: (-i.importance, i.parameter))
