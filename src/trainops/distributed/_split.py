"""Splitting a model into pipeline stages, balanced by parameter count or measured time.

The model's top-level children, in order, are the units (an ``nn.Sequential`` is the usual
shape); a stage is a contiguous run of them. Balancing is the linear-partition problem: the
stages are cut where the heaviest stage is lightest, by parameter count (``by="params"``, what
SageMaker's ``auto_partition`` balances against memory) or by each unit's measured forward time
on a sample batch (``by="time"``). ``split_points`` names the units where stages 2, 3, … begin,
as SageMaker's manual partitioning does.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

from trainops.distributed._world import DistributedError

__all__ = ["balanced_cuts", "split_model"]


def balanced_cuts(weights: Sequence[float], stages: int) -> list[int]:
    """Indexes where stages 2..k begin, so that the heaviest stage is as light as it can be."""
    n = len(weights)
    if not 1 <= stages <= n:
        raise DistributedError(f"cannot split {n} modules into {stages} stages")
    prefix = [0.0]
    for weight in weights:
        prefix.append(prefix[-1] + weight)
    inf = float("inf")
    # best[k][i]: the lightest heaviest-stage of the first i units in k stages; cut[k][i] where
    # the last of those stages begins.
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                cost = max(best[k - 1][j], prefix[i] - prefix[j])
                if cost < best[k][i]:
                    best[k][i], cut[k][i] = cost, j
    cuts, i = [], n
    for k in range(stages, 1, -1):
        i = cut[k][i]
        cuts.append(i)
    return sorted(cuts)


def split_model(
    model: Any,
    stages: int,
    *,
    by: str = "params",
    split_points: Sequence[str | int] | None = None,
    sample: Any = None,
) -> list[Any]:
    """``model``'s top-level children as ``stages`` ``nn.Sequential`` stages."""
    from torch import nn

    names = [name for name, _ in model.named_children()]
    units = list(model.children())
    if split_points is not None:
        cuts = [_position(point, names) for point in split_points]
        in_range = all(0 < cut < len(units) for cut in cuts)
        if len(cuts) != stages - 1 or cuts != sorted(set(cuts)) or not in_range:
            raise DistributedError(
                f"split_points {list(split_points)} must name {stages - 1} distinct modules "
                "after the first, in order"
            )
    elif by == "params":
        cuts = balanced_cuts([_param_count(u) for u in units], stages)
    elif by == "time":
        if sample is None:
            raise DistributedError("by='time' needs a sample batch to time each module on")
        cuts = balanced_cuts(_forward_times(units, sample), stages)
    else:
        raise DistributedError(f"by={by!r}: use 'params' or 'time'")
    bounds = [0, *cuts, len(units)]
    return [nn.Sequential(*units[a:b]) for a, b in itertools.pairwise(bounds)]


def _position(point: str | int, names: list[str]) -> int:
    if isinstance(point, int):
        return point
    if point not in names:
        raise DistributedError(f"split point {point!r} is not a child module ({', '.join(names)})")
    return names.index(point)


def _param_count(module: Any) -> float:
    # A unit without parameters (an activation) still costs a little, so it is not free to pile up.
    return float(sum(p.numel() for p in module.parameters())) or 1.0


def _forward_times(units: list[Any], sample: Any, repeats: int = 3) -> list[float]:
    import torch

    times = []
    with torch.no_grad():
        value = sample
        for unit in units:
            start = time.perf_counter()
            for _ in range(repeats):
                out = unit(value)
            times.append((time.perf_counter() - start) / repeats)
            value = out
    return times
