"""``StepState``: whether a step is there, may still come, or will never come."""

from __future__ import annotations

from enum import Enum

__all__ = ["StepState"]


class StepState(Enum):
    """smdebug's answer of ``has_passed_step``."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2
