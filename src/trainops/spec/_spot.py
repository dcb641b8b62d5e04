"""The managed-spot parts of a job spec: the chaos schedule that rehearses interruptions.

``use_spot_instances`` and ``stopping_condition.max_wait_time_in_seconds`` live on the job spec
itself (their checks read both); ``chaos:`` is a seeded schedule of interruptions a local chaos
service plays against the job, so that a spot job can be rehearsed before it is paid for.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from trainops.spec._base import SpecModel

__all__ = ["MAX_CAPACITY_GAP", "MAX_CHAOS_INTERRUPTIONS", "MAX_NOTICE", "ChaosSpec"]

MAX_CHAOS_INTERRUPTIONS = 1000
MAX_CAPACITY_GAP = 7 * 24 * 3600.0  # a week without capacity: beyond it, rehearse max wait
MAX_NOTICE = 3600.0


class ChaosSpec(SpecModel):
    """A seeded schedule of spot interruptions for one job (the same seed, the same schedule).

    The i-th interruption comes an exponentially distributed time (mean
    ``mean_seconds_between``) after the job last entered Training; its capacity gap is uniform in
    ``capacity_gap_seconds``; each host gets ``notice_seconds`` between SIGTERM and SIGKILL.
    ``hosts``: ``one`` random host is interrupted (the whole job restarts, as on SageMaker) or
    ``all`` of them.
    """

    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    interruptions: int = Field(default=1, ge=0, le=MAX_CHAOS_INTERRUPTIONS)
    mean_seconds_between: float = Field(default=60.0, gt=0, le=MAX_CAPACITY_GAP)
    capacity_gap_seconds: tuple[float, float] = (0.0, 0.0)
    notice_seconds: float = Field(default=120.0, ge=0, le=MAX_NOTICE)
    hosts: Literal["one", "all"] = "one"

    @field_validator("mean_seconds_between", "notice_seconds")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @field_validator("capacity_gap_seconds", mode="before")
    @classmethod
    def _gap_shape(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return (value, value)  # one number: that gap every time
        return value

    @field_validator("capacity_gap_seconds")
    @classmethod
    def _gap(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high)) or low < 0 or high < low:
            raise ValueError(
                "must be [min, max] seconds with 0 <= min <= max (e.g. [5, 30]), or one number"
            )
        if high > MAX_CAPACITY_GAP:
            raise ValueError(f"at most {MAX_CAPACITY_GAP:g} s (a week)")
        return value
