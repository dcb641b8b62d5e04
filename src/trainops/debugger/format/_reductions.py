"""Reductions of a tensor and the names they are saved under (smdebug's ``core/reductions.py``).

A reduction of ``name`` is saved as its own scalar tensor named
``smdebug/reductions/[abs_]<reduction>/<name>`` (``:0``-style suffixes dropped from ``name``);
norms use ``l1``/``l2`` as the reduction. Values are computed over the flattened tensor in
float64 (complex tensors by magnitude).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from trainops.debugger.config import ALLOWED_NORMS, ALLOWED_REDUCTIONS

__all__ = [
    "REDUCTIONS_PREFIX",
    "compute_reduction",
    "reduction_tensor_name",
    "reverse_reduction_tensor_name",
]

REDUCTIONS_PREFIX = "smdebug/reductions/"
_COLON_INDEX = re.compile(r":\d+")


def reduction_tensor_name(name: str, reduction: str, abs: bool) -> str:
    """The name the ``reduction`` (or norm) of tensor ``name`` is saved under."""
    return (
        f"{REDUCTIONS_PREFIX}{'abs_' if abs else ''}{_COLON_INDEX.sub('', f'{reduction}/{name}')}"
    )


def reverse_reduction_tensor_name(saved: str) -> tuple[str, str, bool] | None:
    """``(tensor name, reduction, abs)`` of a reduction's saved name; ``None`` for another name."""
    if not saved.startswith(REDUCTIONS_PREFIX):
        return None
    reduction, _, name = saved[len(REDUCTIONS_PREFIX) :].partition("/")
    absolute = reduction.startswith("abs_")
    reduction = reduction[4:] if absolute else reduction
    if not name or reduction not in (*ALLOWED_REDUCTIONS, *ALLOWED_NORMS):
        return None
    return name, reduction, absolute


def compute_reduction(array: np.ndarray, reduction: str, abs: bool) -> float:
    """The ``reduction`` (or ``l1``/``l2`` norm) of ``array``, of its absolute values if ``abs``."""
    data = np.asarray(array)
    if data.dtype.kind == "c":
        data = np.abs(data)
    data = data.astype(np.float64, copy=False).reshape(-1)
    if abs:
        data = np.abs(data)
    if reduction in ("min", "max", "mean", "std", "variance") and data.size == 0:
        raise ValueError(f"cannot compute {reduction} of an empty tensor")
    if reduction not in _REDUCE:
        return _unknown(reduction)
    return float(_REDUCE[reduction](data))


def _unknown(reduction: str) -> float:
    allowed = ", ".join((*ALLOWED_REDUCTIONS, *ALLOWED_NORMS))
    raise ValueError(f"reduction {reduction!r} is not one of {allowed}")


_REDUCE: dict[str, Callable[[np.ndarray], Any]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda data: np.sum(np.abs(data)),
    "l2": lambda data: np.sqrt(np.sum(data * data)),
}
