"""OverallFrameworkMetrics: where the training loop's time goes. It never fires.

From the step series: steps and seconds per mode (TRAIN, EVAL), the share of step time in each
phase (waiting for data, forward, backward, optimizer, the rest), and the training loop's start
and end against the job's (initialization and finalization).
"""

from __future__ import annotations

from typing import Any

from trainops.profiler import MODE_EVAL, MODE_TRAIN, Series
from trainops.rules._base import (
    IN_PROGRESS,
    NO_ISSUES_FOUND,
    ProfilerData,
    ProfilerRule,
    RuleResult,
)
from trainops.rules._initialization import job_start
from trainops.rules._stats import fmt

__all__ = ["OverallFrameworkMetrics", "framework_summary"]

PHASES = ("data", "forward", "backward", "optimizer")
MODES = {MODE_TRAIN: "TRAIN", MODE_EVAL: "EVAL"}


def _mode(value: float) -> str:
    return MODES.get(value, "TRAIN" if value != value else "OTHER")


def framework_summary(steps: list[Series]) -> dict[str, Any]:
    """Steps, seconds and phase seconds per mode, and the loop's first start and last end."""
    modes: dict[str, dict[str, float]] = {}
    first, last = float("inf"), float("-inf")
    for series in steps:
        index = {name: i for i, name in enumerate(series.columns)}
        for row in series.rows:
            duration = row[index["duration"]] if "duration" in index else float("nan")
            if duration != duration:
                continue
            mode = _mode(row[index["mode"]]) if "mode" in index else "TRAIN"
            slot = modes.setdefault(mode, {"steps": 0, "seconds": 0.0} | dict.fromkeys(PHASES, 0.0))
            slot["steps"] += 1
            slot["seconds"] += duration
            for phase in PHASES:
                value = row[index[phase]] if phase in index else float("nan")
                if value == value:
                    slot[phase] += value
                    slot[f"{phase}_seen"] = 1.0
            first, last = min(first, row[0]), max(last, row[0] + duration)
    return {"modes": modes, "loop_start": first, "loop_end": last}


class OverallFrameworkMetrics(ProfilerRule):
    name = "OverallFrameworkMetrics"

    def _evaluate(self, data: ProfilerData) -> RuleResult:
        summary = framework_summary([data.steps[k] for k in sorted(data.steps)])
        modes = summary["modes"]
        if not modes:
            return RuleResult(IN_PROGRESS, "no step timings were recorded yet", "", {})
        evidence: dict[str, Any] = {"modes": {}, "ranks": len(data.steps)}
        for mode, slot in modes.items():
            seconds = slot["seconds"] or 1.0
            # Only the phases some step recorded; the rest of the step time is "other".
            shares = {p: 100.0 * slot[p] / seconds for p in PHASES if f"{p}_seen" in slot}
            shares["other"] = max(0.0, 100.0 - sum(shares.values()))
            evidence["modes"][mode] = {
                "steps": int(slot["steps"]),
                "seconds": slot["seconds"],
                "mean_step_seconds": slot["seconds"] / slot["steps"],
                "phase_percent": shares,
            }
        evidence |= self._loop(data, summary)
        return RuleResult(NO_ISSUES_FOUND, _line(evidence), "", evidence)

    @staticmethod
    def _loop(data: ProfilerData, summary: dict[str, Any]) -> dict[str, Any]:
        start, end = summary["loop_start"], summary["loop_end"]
        found = {"training_loop_start": start, "training_loop_end": end}
        found["training_loop_seconds"] = end - start
        began = job_start(data)
        if began is not None:
            found["initialization_seconds"] = max(0.0, start - began)
        if data.job_end is not None:
            found["finalization_seconds"] = max(0.0, data.job_end - end)
        return found


def _line(evidence: dict[str, Any]) -> str:
    parts = []
    for mode, slot in evidence["modes"].items():
        shares = slot["phase_percent"]
        split = ", ".join(f"{p} {fmt(share, 0)} %" for p, share in shares.items())
        parts.append(
            f"{slot['steps']} {mode} steps, mean {slot['mean_step_seconds']:.3f} s ({split})"
        )
    init = evidence.get("initialization_seconds")
    if isinstance(init, float):
        parts.append(f"initialization {init:.1f} s")
    return "; ".join(parts)
