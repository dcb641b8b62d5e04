"""Histograms as TensorBoard's ``HistogramProto``: TensorFlow's default buckets and encoding.

TensorFlow's histogram (tensorflow/core/lib/histogram/histogram.cc) has fixed buckets whose
right edges grow by 10 % from 1e-12 to 1e20, mirrored for negative values, with 0 in the middle
and +-DBL_MAX at the ends (:data:`DEFAULT_BUCKET_LIMITS`, 1,551 edges). A value falls in the
first bucket whose edge is above it. ``EncodeToProto`` then collapses every run of empty buckets
into its last one, so a histogram of a few values is a few dozen numbers, whatever its range.
TensorBoard's histogram and distribution dashboards both read this proto.

Values that are not finite (NaN, +-inf) have no bucket: they are left out of the histogram
(and of its min, max, sum and count), as TensorBoard could not draw them; a tensor without a
finite value gives none. numpy is imported when the first histogram is made.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainops.tensorboard._proto import double_field, packed_doubles

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_BUCKET_LIMITS", "Histogram", "histogram_of"]

_INSTALL_HINT = "TensorBoard histograms need numpy: pip install numpy"


def _default_bucket_limits() -> tuple[float, ...]:
    """TensorFlow's default bucket edges (``InitDefaultBucketsInner``)."""
    positive: list[float] = []
    edge = 1.0e-12
    while edge < 1.0e20:
        positive.append(edge)
        edge *= 1.1
    positive.append(sys.float_info.max)
    return tuple([-v for v in reversed(positive)] + [0.0] + positive)


DEFAULT_BUCKET_LIMITS = _default_bucket_limits()
_LIMITS: list[np.ndarray] = []  # the limits as an array, made with the first histogram


@dataclass(frozen=True, slots=True)
class Histogram:
    """One ``HistogramProto``: the summary numbers and the (collapsed) buckets, each bucket
    holding the values below its limit and at or above the previous one."""

    min: float
    max: float
    num: float
    sum: float
    sum_squares: float
    bucket_limit: tuple[float, ...]
    bucket: tuple[float, ...]

    def encode(self) -> bytes:
        """The proto's bytes, as protobuf's serializer writes them."""
        head = double_field(1, self.min) + double_field(2, self.max) + double_field(3, self.num)
        head += double_field(4, self.sum) + double_field(5, self.sum_squares)
        return head + packed_doubles(6, self.bucket_limit) + packed_doubles(7, self.bucket)


def histogram_of(values: Any) -> Histogram | None:
    """The histogram of ``values`` (anything ``numpy.asarray`` takes: an array, a list, a CPU
    tensor) over the default buckets; None when no value is finite."""
    flat = _finite_doubles(values)
    if flat.size == 0:
        return None
    return _encode_buckets(flat)


def _finite_doubles(values: Any) -> np.ndarray:
    try:
        import numpy as np
    except ImportError as exc:  # pragma: no cover - numpy is in every environment we test
        raise ImportError(_INSTALL_HINT) from exc
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"a histogram needs numbers, not {array.dtype} values")
    flat = array.astype(np.float64, copy=False).reshape(-1)
    return flat[np.isfinite(flat)]


def _encode_buckets(flat: np.ndarray) -> Histogram:
    import numpy as np

    if not _LIMITS:
        _LIMITS.append(np.asarray(DEFAULT_BUCKET_LIMITS))
    limits = _LIMITS[0]
    index = _bucket_index(flat, limits)
    counts = np.bincount(np.minimum(index, limits.size - 1), minlength=limits.size)
    bucket_limit, bucket = _collapse(limits, counts)
    return Histogram(
        min=float(flat.min()),
        max=float(flat.max()),
        num=float(flat.size),
        # added one by one, as TensorFlow does (numpy's pairwise sum rounds differently)
        sum=float(np.cumsum(flat)[-1]),
        sum_squares=float(np.cumsum(flat * flat)[-1]),
        bucket_limit=bucket_limit,
        bucket=bucket,
    )


_FIRST_EDGE, _GROWTH = 1.0e-12, 1.1


def _bucket_index(flat: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """``numpy.searchsorted(limits, flat, side="right")``, several times faster: the edges grow
    geometrically, so a logarithm puts each value next to its bucket, and comparisons with the
    real edges (which the logarithm may miss by one, in rounding) make it exact."""
    import numpy as np

    positive = (limits.size - 1) // 2  # edges above 0 (the same count below it)
    magnitude = np.abs(flat)
    with np.errstate(divide="ignore"):  # log(0) is -inf: no edge below it
        steps = (np.log(magnitude) - np.log(_FIRST_EDGE)) / np.log(_GROWTH)
    below = np.clip(np.floor(np.nan_to_num(steps, neginf=-1.0)) + 1, 0, positive)
    index: np.ndarray = np.where(flat >= 0, positive + 1 + below, positive - below)
    index = index.astype(np.int64)
    padded = np.append(limits, np.inf)
    for _ in range(2):  # the estimate is off by at most one either way; twice to be sure
        np.clip(index, 1, limits.size, out=index)
        index += padded[index] <= flat
        index -= padded[index - 1] > flat
    return index


def _collapse(
    limits: np.ndarray, counts: np.ndarray
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``EncodeToProto`` without ``preserve_zero_buckets``: each run of empty buckets becomes
    its last bucket (an empty bucket whose limit is the run's right edge)."""
    import numpy as np

    empty = counts == 0
    # keep a bucket that holds values, or the last of a run of empty ones
    keep = ~empty | np.append(~empty[1:], True)
    return tuple(limits[keep].tolist()), tuple(counts[keep].astype(np.float64).tolist())
