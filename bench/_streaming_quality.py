"""Shuffle quality of one epoch's order of sample ids (bench/streaming.py, streaming.md §12.2).

- ``entropy_ids`` / ``entropy_shards``: MosaicML's measure (their simulator's
  ``shuffle_quality.py``), the entropy in bits of the distribution of ``|id[k+1] - id[k]|``,
  over sample ids and over the ids of the shards the samples were packed in;
- ``mean_shard_run``: the mean length of runs of consecutive samples from one shard;
- ``ks_mean``: for each shard, the Kolmogorov-Smirnov distance between the epoch positions of
  its samples and the uniform distribution, averaged over shards (0 when a shard's samples are
  spread evenly over the epoch, 1 when they come all together at one end).

The same figures for a true global permutation and for no shuffle at all frame the scale.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence

__all__ = ["quality", "references"]


def _entropy(values: Sequence[int]) -> float:
    diffs = Counter(abs(b - a) for a, b in itertools.pairwise(values))
    total = len(values) - 1
    return -sum(c / total * math.log2(c / total) for c in diffs.values()) if total > 0 else 0.0


def _mean_run(shards: Sequence[int]) -> float:
    runs = 1 + sum(1 for a, b in itertools.pairwise(shards) if a != b)
    return len(shards) / runs if shards else 0.0


def _ks(positions: list[float]) -> float:
    positions.sort()
    m = len(positions)
    return max(max((i + 1) / m - x, x - i / m) for i, x in enumerate(positions))


def _ks_mean(ids: Sequence[int], per_shard: int) -> float:
    where: defaultdict[int, list[float]] = defaultdict(list)
    n = len(ids)
    for position, g in enumerate(ids):
        where[g // per_shard].append(position / n)
    return sum(_ks(p) for p in where.values()) / len(where) if where else 0.0


def quality(ids: Sequence[int], per_shard: int) -> dict[str, float]:
    shards = [g // per_shard for g in ids]
    return {
        "entropy_ids": round(_entropy(ids), 3),
        "entropy_shards": round(_entropy(shards), 3),
        "mean_shard_run": round(_mean_run(shards), 2),
        "ks_mean": round(_ks_mean(ids, per_shard), 4),
    }


def references(n: int, per_shard: int, seed: int) -> dict[str, dict[str, float]]:
    shuffled = list(range(n))
    random.Random(seed).shuffle(shuffled)
    return {
        "global_permutation": quality(shuffled, per_shard),
        "no_shuffle": quality(list(range(n)), per_shard),
    }
