"""StepOutlier: steps far slower than the mean.

Per rank and per mode (TRAIN and EVAL apart when ``mode`` is None; one of them, or every step
together for ``GLOBAL``): a step is an outlier when it lasts longer than mean + ``stddev``
standard deviations; the rule fires when a rank has more than ``n_outliers`` of them.
"""

from __future__ import annotations

from typing import Any

from trainops.profiler import MODE_EVAL, MODE_TRAIN, Series
from trainops.rules._base import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    ProfilerData,
    ProfilerRule,
    RuleResult,
)
from trainops.rules._stats import finite, mean, pstdev

__all__ = ["StepOutlier", "durations_by_mode"]

MODE_VALUES = {"TRAIN": MODE_TRAIN, "EVAL": MODE_EVAL}


def durations_by_mode(series: Series, mode: str | None) -> dict[str, list[float]]:
    """Step durations of ``series`` by mode name, as the rule's ``mode`` groups them."""
    durations, modes = series.column("duration"), series.column("mode")
    if not modes:
        modes = [MODE_TRAIN] * len(durations)
    if mode == "GLOBAL":
        return {"GLOBAL": finite(durations)}
    wanted = ("TRAIN", "EVAL") if mode is None else (mode,)
    return {
        name: finite(d for d, m in zip(durations, modes, strict=True) if m == MODE_VALUES[name])
        for name in wanted
    }


class StepOutlier(ProfilerRule):
    name = "StepOutlier"

    def _evaluate(self, data: ProfilerData) -> RuleResult:
        factor, allowed = self.number("stddev"), self.whole("n_outliers")
        evidence: dict[str, Any] = {}
        for (host, rank), series in sorted(data.steps.items()):
            for mode, values in durations_by_mode(series, self.parameters["mode"]).items():
                if len(values) < 2:
                    continue
                centre, spread = mean(values), pstdev(values)
                limit = centre + factor * spread
                count = sum(v > limit for v in values)
                evidence[f"{host}/rank-{rank}/{mode}"] = {
                    "steps": len(values),
                    "mean": centre,
                    "stddev": spread,
                    "threshold": limit,
                    "outliers": count,
                    "max": max(values),
                }
        if not evidence:
            return RuleResult(IN_PROGRESS, "fewer than two step timings per rank so far", "", {})
        worst_key = max(evidence, key=lambda k: evidence[k]["outliers"])
        worst = evidence[worst_key]
        line = (
            f"{worst_key}: {worst['outliers']} of {worst['steps']} steps took longer than "
            f"{worst['threshold']:.3f} s (mean {worst['mean']:.3f} s + {factor:g} sd; "
            f"slowest {worst['max']:.3f} s)"
        )
        if worst["outliers"] <= allowed:
            return RuleResult(NO_ISSUES_FOUND, line, "", evidence)
        advice = (
            f"{worst['outliers']} steps were up to {_ratio(worst['max'], worst['mean'])} times "
            "the mean: look for work done every N steps inside the loop (checkpointing, evaluation, "
            "logging, garbage collection, data shards opening) and move it out or make it "
            "asynchronous."
        )
        return RuleResult(ISSUES_FOUND, f"{line}, more than {allowed}", advice, evidence)


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.1f}" if base > 0 else "many"
