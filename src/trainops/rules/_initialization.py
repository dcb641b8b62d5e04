"""MaxInitializationTime: the first training step comes later than ``threshold`` minutes after the
job began (or has not come by then)."""

from __future__ import annotations

from trainops.rules._base import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    ProfilerData,
    ProfilerRule,
    RuleResult,
)
from trainops.rules._stats import finite

__all__ = ["MaxInitializationTime", "job_start", "loop_start"]


def job_start(data: ProfilerData) -> float | None:
    """When the job began: the view's ``job_start``, else the earliest monitor start."""
    if data.job_start is not None:
        return data.job_start
    started = finite(float(m["started"]) for m in data.meta.values() if _number(m.get("started")))
    return min(started) if started else None


def loop_start(data: ProfilerData) -> float | None:
    """When the first step (of any rank, any mode) began; None before any."""
    firsts = [series.rows[0][0] for series in data.steps.values() if series.rows]
    return min(firsts) if firsts else None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class MaxInitializationTime(ProfilerRule):
    name = "MaxInitializationTime"

    def _evaluate(self, data: ProfilerData) -> RuleResult:
        limit = self.number("threshold") * 60.0
        start = job_start(data)
        if start is None:
            return RuleResult(IN_PROGRESS, "the job's start time is not known yet", "", {})
        first = loop_start(data)
        if first is not None:
            waited = max(0.0, first - start)
            evidence = {"initialization_seconds": waited, "threshold_seconds": limit}
            line = f"the first step began {waited:.1f} s after the job started"
            if waited <= limit:
                return RuleResult(NO_ISSUES_FOUND, line, "", evidence)
            return RuleResult(ISSUES_FOUND, f"{line}, more than {limit:g} s", _ADVICE, evidence)
        now = data.job_end if data.job_end is not None else data.now
        waited = 0.0 if now is None else max(0.0, now - start)
        evidence = {"initialization_seconds": waited, "threshold_seconds": limit, "steps": 0}
        if waited > limit:
            line = f"no step was recorded in the {waited:.0f} s after the job started"
            return RuleResult(ISSUES_FOUND, f"{line}, more than {limit:g} s", _ADVICE, evidence)
        return RuleResult(IN_PROGRESS, f"no step recorded yet, {waited:.0f} s in", "", evidence)


_ADVICE = (
    "Initialization takes long: download less up front (FastFile or Pipe input instead of File), "
    "load the model and data lazily, and cache compiled kernels or datasets between jobs."
)
