"""Column families, units and the order the report lists a host's metrics in.

Names and units are the profiler's contract (``trainops.profiler._names``); numbered columns
(``cpu3``, ``gpu0_memory``) belong to their family (``cpu<N>``, ``gpu<N>_memory``).
"""

from __future__ import annotations

import re

from trainops.profiler import DATALOADER_COLUMNS, STEP_COLUMNS, UNITS

__all__ = ["family", "gpu_indices", "number_of", "ordered_columns", "unit_of"]

_NUMBERED = re.compile(r"^(cpu|gpu)(\d+)(_memory_bytes|_memory)?$")
# The system families in the contract's own order (host CPU, cores, I/O wait, memory, disk,
# network, GPUs): every name of UNITS that is not a step or dataloader column.
_ORDER = tuple(name for name in UNITS if name not in (*STEP_COLUMNS, *DATALOADER_COLUMNS))


def family(column: str) -> str:
    """``cpu3`` -> ``cpu<N>``, ``gpu0_memory`` -> ``gpu<N>_memory``; other names are their own."""
    match = _NUMBERED.match(column)
    if match is None:
        return column
    return f"{match.group(1)}<N>{match.group(3) or ''}"


def number_of(column: str) -> int:
    match = _NUMBERED.match(column)
    return int(match.group(2)) if match else -1


def unit_of(column: str) -> str:
    return UNITS.get(family(column), "")


def ordered_columns(columns: list[str]) -> list[str]:
    """The metric columns (not ``time``) in the report's order: host CPU, cores by number,
    I/O wait, memory, disk, network, then GPUs by number; unknown columns last, by name."""

    def key(column: str) -> tuple[int, int, str]:
        kind = family(column)
        rank = _ORDER.index(kind) if kind in _ORDER else len(_ORDER)
        return rank, number_of(column), column

    return sorted((c for c in columns if c != "time"), key=key)


def gpu_indices(columns: list[str]) -> list[int]:
    """The GPUs with a utilization column, by number."""
    return sorted(number_of(c) for c in columns if family(c) == "gpu<N>")
