"""What `trainops tune` prints: the table of trials, the counts, the best so far, a line per trial
that moves, why the job ended; user strings never reach the terminal as control characters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from trainops.cli._tune_table import format_ending, format_trials, trial_events, trial_states


def _trial(number: int, status: str, objective: float | None, **tuned: str) -> dict[str, Any]:
    trial: dict[str, Any] = {
        "TrainingJobName": f"tj-{number:03d}",
        "TrialNumber": number,
        "TrainingJobStatus": status,
        "TunedHyperParameters": tuned,
        "CreationTime": "2026-11-27T06:00:00+00:00",
    }
    if status != "InProgress" or objective is not None:
        trial["TrainingStartTime"] = "2026-11-27T06:00:02+00:00"
    if status != "InProgress":
        trial["TrainingEndTime"] = "2026-11-27T06:00:14+00:00"
    if objective is not None:
        trial["FinalHyperParameterTuningJobObjectiveMetric"] = {
            "Type": "Minimize", "MetricName": "test_loss", "Value": objective}  # fmt: skip
    return trial


def _described(*trials: dict[str, Any], status: str = "InProgress") -> dict[str, Any]:
    counts = {"Completed": 0, "InProgress": 0, "RetryableError": 0, "NonRetryableError": 0,
              "Stopped": 0}  # fmt: skip
    for trial in trials:
        counts[trial["TrainingJobStatus"]] += 1
    described: dict[str, Any] = {
        "HyperParameterTuningJobName": "tj",
        "HyperParameterTuningJobStatus": status,
        "TrainingJobStatusCounters": counts,
        "TrainingJobs": list(trials),
    }
    scored = [t for t in trials if "FinalHyperParameterTuningJobObjectiveMetric" in t]
    if scored:
        described["BestTrainingJob"] = min(
            scored, key=lambda t: t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
        )
    return described


NOW = datetime(2026, 11, 27, 6, 0, 32, tzinfo=UTC)


def test_the_table_has_each_trials_values_status_objective_elapsed_counts_and_best() -> None:
    described = _described(
        _trial(0, "Completed", 0.0612345, lr="0.0031476414761163283", optimizer="adam"),
        _trial(1, "Stopped", 1.5, lr="0.2", optimizer="sgd"),
        _trial(2, "InProgress", 0.9, lr="1e-05", optimizer="rmsprop"),
        _trial(3, "InProgress", None, lr="0.01", optimizer="sgd"),  # waits to start
    )
    assert format_trials(described, now=NOW).splitlines() == [
        "tj: InProgress (Completed 1, InProgress 2, RetryableError 0, NonRetryableError 0, "
        "Stopped 1)",
        "#  TRAINING JOB  LR        OPTIMIZER  STATUS      OBJECTIVE  ELAPSED",
        "0  tj-000        0.003148  adam       Completed   0.0612345  12s",
        "1  tj-001        0.2       sgd        Stopped     1.5        12s",
        "2  tj-002        1e-05     rmsprop    InProgress  0.9        30s",
        "3  tj-003        0.01      sgd        InProgress",
        "Best so far: #0 tj-000 test_loss=0.0612345 (lr=0.003148, optimizer=adam)",
    ]


def test_a_line_per_trial_that_starts_or_ends_and_why_the_job_ended() -> None:
    running = _described(_trial(0, "InProgress", None, lr="0.1"))
    assert trial_events({}, running) == ["#0 tj-000 InProgress (lr=0.1)"]
    seen = trial_states(running)
    assert trial_events(seen, running) == []  # nothing moved
    ended = _described(
        _trial(0, "Stopped", 2.25, lr="0.1"), _trial(1, "InProgress", None, lr="0.2"),
        status="Completed",
    )  # fmt: skip
    assert trial_events(seen, ended) == [
        "#0 tj-000 Stopped after 12s, objective 2.25 (lr=0.1)",
        "#1 tj-001 InProgress (lr=0.2)",
    ]
    ended["CompletionReason"] = "TargetObjectiveMetricValueReached"
    assert format_ending(ended) == (
        "Tuning job tj Completed: TargetObjectiveMetricValueReached; best: #0 tj-000 "
        "test_loss=2.25 (lr=0.1)"
    )
    assert format_ending(_described(status="Stopped")) == (
        "Tuning job tj Stopped: no reason given; no trial has an objective"
    )


def test_tuned_names_and_values_are_shown_without_control_characters() -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J"
    described = _described(_trial(0, "Completed", 1.0, **{hostile: hostile + "x" * 40}))
    shown = format_trials(described, now=NOW) + "\n".join(trial_events({}, described))
    shown += format_ending(described)
    assert "\x1b" not in shown and "\x07" not in shown
    assert "\\x1b]0;owned\\x07" in shown
    assert all(len(cell) <= 24 for line in shown.splitlines()[2:3] for cell in line.split("  "))


def test_a_terminal_gets_the_table_drawn_over_in_place_and_cut_to_its_width(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trainops.cli._tune import _Display

    monkeypatch.setenv("COLUMNS", "40")
    display = _Display(terminal=True)
    described = _described(_trial(0, "InProgress", None, lr="0.1"))
    display.show(described)
    first = capsys.readouterr().out
    display.show(described)
    again = capsys.readouterr().out
    assert "\x1b" not in first
    drawn = len(first.splitlines())
    assert again.startswith(f"\x1b[{drawn}F\x1b[J")  # back to the table's first line, cleared
    assert all(len(line) <= 40 for line in again.removeprefix(f"\x1b[{drawn}F\x1b[J").splitlines())
    piped = _Display(terminal=False)
    piped.show(described)
    piped.show(described)
    assert capsys.readouterr().out == "#0 tj-000 InProgress (lr=0.1)\n"  # once, not per poll
