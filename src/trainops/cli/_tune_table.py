"""What ``trainops tune`` prints, as pure functions of a tuning job's description.

The table of trials (each trial's tuned hyperparameters, status, objective and elapsed time),
the counts by status, the best so far, one line per trial that moved (for output that is not a
terminal) and the line saying why the job ended. Tuned names and values are the user's: every
cell is shown as printable text (a control character as its escape), so nothing in a tuning
file can move the terminal's cursor or retitle its window.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from trainops.cli._render import format_table, printable

__all__ = [
    "COUNTED",
    "format_ending",
    "format_trials",
    "printable",
    "trial_events",
    "trial_states",
]

#: The TrainingJobStatusCounters shown, in this order.
COUNTED = ("Completed", "InProgress", "RetryableError", "NonRetryableError", "Stopped")
_CELL = 24  # the longest categorical value shown in full


def format_trials(described: dict[str, Any], now: datetime | None = None) -> str:
    """The live table: each trial's hyperparameters, status, objective and elapsed time, the
    counts by status and the best so far."""
    trials = described.get("TrainingJobs", [])
    tuned = _tuned_names(trials)
    rows = [_row(t, tuned, now) for t in trials]
    header = ["#", "TRAINING JOB", *(printable(k.upper()) for k in tuned)]
    header += ["STATUS", "OBJECTIVE", "ELAPSED"]
    lines = [_headline(described), format_table(header, rows) if rows else "No trials yet."]
    best = described.get("BestTrainingJob")
    if best is not None:
        lines.append(f"Best so far: {_best(best)}")
    return "\n".join(lines)


def _headline(described: dict[str, Any]) -> str:
    counters = described.get("TrainingJobStatusCounters", {})
    counts = ", ".join(f"{k} {counters.get(k, 0)}" for k in COUNTED)
    name = printable(described["HyperParameterTuningJobName"])
    return f"{name}: {described['HyperParameterTuningJobStatus']} ({counts})"


def _tuned_names(trials: list[dict[str, Any]]) -> list[str]:
    return sorted({k for t in trials for k in t.get("TunedHyperParameters", {})})


def _row(trial: dict[str, Any], tuned: list[str], now: datetime | None) -> list[str]:
    objective = objective_of(trial)
    return [
        str(trial["TrialNumber"]),
        printable(trial["TrainingJobName"]),
        *(_short(trial["TunedHyperParameters"].get(k, "")) for k in tuned),
        trial["TrainingJobStatus"],
        "" if objective is None else f"{objective:.6g}",
        _elapsed(trial, now),
    ]


def objective_of(trial: dict[str, Any]) -> float | None:
    """The trial's final objective (the last one a stopped trial reported), if it has one."""
    metric = trial.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    value = metric.get("Value")
    return None if value is None else float(value)


def _best(best: dict[str, Any]) -> str:
    metric = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    tuned = best.get("TunedHyperParameters", {})
    values = ", ".join(f"{printable(k)}={_short(v)}" for k, v in sorted(tuned.items()))
    name = printable(best["TrainingJobName"])
    return f"#{best.get('TrialNumber', '?')} {name} {metric.get('MetricName', 'objective')}=" + (
        f"{objective_of(best):.6g} ({values})"
    )


def _short(value: str) -> str:
    """A number in 4 significant digits, other text cut to :data:`_CELL` characters."""
    try:
        return f"{float(value):.4g}"
    except ValueError:
        text = printable(value)
        return text if len(text) <= _CELL else text[: _CELL - 3] + "..."


def _elapsed(trial: dict[str, Any], now: datetime | None) -> str:
    """Seconds since the trial's training started (to its end); empty while it waits to start."""
    start = trial.get("TrainingStartTime")
    if not start:
        return ""
    end_text = trial.get("TrainingEndTime")
    end = datetime.fromisoformat(end_text) if end_text else (now or datetime.now(UTC))
    return f"{(end - datetime.fromisoformat(start)).total_seconds():.0f}s"


def trial_states(described: dict[str, Any]) -> dict[str, str]:
    """Each trial's status by name: what :func:`trial_events` compares."""
    return {t["TrainingJobName"]: t["TrainingJobStatus"] for t in described.get("TrainingJobs", [])}


def trial_events(before: dict[str, str], described: dict[str, Any]) -> list[str]:
    """One line per trial that started or changed status since ``before``."""
    lines = []
    for trial in described.get("TrainingJobs", []):
        status = trial["TrainingJobStatus"]
        if before.get(trial["TrainingJobName"]) == status:
            continue
        tuned = trial.get("TunedHyperParameters", {})
        values = ", ".join(f"{printable(k)}={_short(v)}" for k, v in sorted(tuned.items()))
        objective = objective_of(trial)
        result = "" if objective is None else f", objective {objective:.6g}"
        elapsed = _elapsed(trial, None) if trial.get("TrainingEndTime") else ""
        took = f" after {elapsed}" if elapsed else ""
        lines.append(
            f"#{trial['TrialNumber']} {printable(trial['TrainingJobName'])} {status}{took}"
            f"{result} ({values})"
        )
    return lines


def format_ending(described: dict[str, Any]) -> str:
    """Why the tuning job ended, and its best trial."""
    status = described["HyperParameterTuningJobStatus"]
    why = described.get("CompletionReason") or described.get("FailureReason") or "no reason given"
    best = described.get("BestTrainingJob")
    found = "no trial has an objective" if best is None else f"best: {_best(best)}"
    name = printable(described["HyperParameterTuningJobName"])
    return f"Tuning job {name} {status}: {printable(why).rstrip('.')}; {found}"
