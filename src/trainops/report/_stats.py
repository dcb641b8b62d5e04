"""Small statistics the report needs, in plain Python: percentiles, histograms, downsampling.

Percentiles interpolate linearly between the two nearest ranks, as ``numpy.percentile`` does by
default, so the report's figures can be checked against numpy. NaN values (a column a recorder
left out of some rows) are ignored everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "PERCENTILES",
    "describe_values",
    "downsample",
    "finite",
    "histogram",
    "js_distance",
    "percentile",
    "rounded",
]

#: The usage statistics of every metric, as SageMaker's report lists them.
PERCENTILES = (("max", 100.0), ("p99", 99.0), ("p95", 95.0), ("p50", 50.0), ("min", 0.0))


def finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v) and not math.isinf(v)]


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of already sorted, finite ``ordered`` (not empty)."""
    if not ordered:
        raise ValueError("percentile of no values")
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


def rounded(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant digits (JSON stays short; no figure needs more)."""
    if value == 0 or math.isnan(value) or math.isinf(value):
        return 0.0 if math.isnan(value) or math.isinf(value) else value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def describe_values(values: Sequence[float]) -> dict[str, Any] | None:
    """max, p99, p95, p50, min, mean and count of the finite ``values``; None without any."""
    ordered = sorted(finite(values))
    if not ordered:
        return None
    found: dict[str, Any] = {name: rounded(percentile(ordered, q)) for name, q in PERCENTILES}
    found["mean"] = rounded(math.fsum(ordered) / len(ordered))
    found["count"] = len(ordered)
    return found


def histogram(values: Sequence[float], bins: int = 30) -> dict[str, list[float]]:
    """Counts of ``values`` in ``bins`` equal bins between their min and max (``edges`` has
    ``bins + 1`` entries; the last bin includes its right edge)."""
    data = finite(values)
    if not data:
        return {"edges": [], "counts": []}
    low, high = min(data), max(data)
    if high == low:
        return {"edges": [rounded(low), rounded(high)], "counts": [float(len(data))]}
    width = (high - low) / bins
    counts = [0.0] * bins
    for value in data:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return {"edges": [rounded(low + i * width) for i in range(bins + 1)], "counts": counts}


def downsample(
    times: Sequence[float], values: Sequence[float], limit: int = 2000
) -> list[list[float]]:
    """``[[t, v], ...]`` of at most ``limit`` points that keeps each stretch's min and max
    (``t`` to the millisecond: pass times relative to the job's start).

    The points are cut into ``limit // 2`` runs of equal count; each run gives its lowest and
    highest point, in time order, so a spike or a dip survives however long the job ran.
    """
    points = [(t, v) for t, v in zip(times, values, strict=True) if not math.isnan(v)]
    if len(points) <= limit:
        return [[round(t, 3), rounded(v)] for t, v in points]
    runs = max(1, limit // 2)
    kept: list[tuple[float, float]] = []
    for index in range(runs):
        run = points[index * len(points) // runs : (index + 1) * len(points) // runs]
        if not run:
            continue
        low, high = min(run, key=lambda p: p[1]), max(run, key=lambda p: p[1])
        kept.extend(sorted({low, high}))
    return [[round(t, 3), rounded(v)] for t, v in kept]


def js_distance(first: Sequence[float], second: Sequence[float], bins: int = 20) -> float:
    """Jensen-Shannon distance (base 2, 0 to 1) between the histograms of two utilization
    series on 0-100 %, as SageMaker's LoadBalancing rule compares two GPUs."""
    p, q = _shares(first, bins), _shares(second, bins)
    middle = [(a + b) / 2 for a, b in zip(p, q, strict=True)]
    divergence = (_kl(p, middle) + _kl(q, middle)) / 2
    return math.sqrt(max(0.0, divergence))


def _shares(values: Sequence[float], bins: int) -> list[float]:
    counts = [0.0] * bins
    data = finite(values)
    for value in data:
        counts[min(max(int(value / (100.0 / bins)), 0), bins - 1)] += 1
    total = sum(counts) or 1.0
    return [c / total for c in counts]


def _kl(p: Sequence[float], q: Sequence[float]) -> float:
    return sum(a * math.log2(a / b) for a, b in zip(p, q, strict=True) if a > 0 and b > 0)
