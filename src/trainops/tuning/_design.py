"""The start design of a model-based search: its first trials spread over the space.

Before a model has data, a sampler draws its first trials independently at random, and a few
random points clump: on 6 ranges, 10 draws leave whole halves of some range untried. A Latin
hypercube puts exactly one of the ``size`` points in each ``1/size`` slice of every range
(each Categorical value about equally often); of several such designs the one whose closest
two points are farthest apart (maximin) is kept. The design is a function of the job's seed
alone, so a rebuilt search proposes the same start.

Points are made in each Optuna distribution's own scale (a log range is sliced on its log, an
Integer range's slices cover its whole numbers as Optuna's random sampler does).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = ["DESIGN_CANDIDATES", "design_point", "latin_hypercube"]

DESIGN_CANDIDATES = 32  # Latin hypercubes drawn; the maximin one is kept


def latin_hypercube(size: int, dims: int, seed: int) -> Any:
    """A ``size`` x ``dims`` array in [0, 1): one point per slice of each dimension, the
    maximin one of :data:`DESIGN_CANDIDATES` random Latin hypercubes seeded by ``seed``."""
    import numpy as np

    rng = np.random.RandomState(zlib.crc32(f"{seed}:design".encode()))
    best, best_gap = None, -1.0
    for _ in range(DESIGN_CANDIDATES):
        slices = np.stack([rng.permutation(size) for _ in range(dims)], axis=1)
        points = (slices + rng.uniform(size=(size, dims))) / size
        gap = _closest_pair(points)
        if gap > best_gap:
            best, best_gap = points, gap
    return best


def _closest_pair(points: Any) -> float:
    import numpy as np

    diff = points[:, None, :] - points[None, :, :]
    dist = np.sqrt((diff**2).sum(axis=-1))
    np.fill_diagonal(dist, np.inf)
    return float(dist.min())


def design_point(
    distributions: Mapping[str, Any], size: int, seed: int, number: int
) -> dict[str, Any]:
    """Point ``number`` (below ``size``) of the design over ``distributions`` (Optuna's),
    as Optuna parameter values (names in sorted order pick the design's columns)."""
    names = sorted(distributions)
    row = latin_hypercube(size, len(names), seed)[number]
    return {
        name: _scaled(distributions[name], float(u)) for name, u in zip(names, row, strict=True)
    }


def _scaled(dist: Any, u: float) -> Any:
    """``u`` in [0, 1) as a value of the Optuna distribution ``dist``."""
    choices = getattr(dist, "choices", None)
    if choices is not None:
        return choices[min(int(u * len(choices)), len(choices) - 1)]
    whole = isinstance(dist.low, int)
    low, high = (dist.low - 0.5, dist.high + 0.5) if whole else (dist.low, dist.high)
    if dist.log:
        low, high = math.log(max(low, 1e-300)), math.log(high)
    value = low + u * (high - low)
    if dist.log:
        value = math.exp(value)
    if whole:
        return min(max(round(value), dist.low), dist.high)
    return min(max(value, dist.low), dist.high)
