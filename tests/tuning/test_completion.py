"""Completion criteria (target, not improving, convergence, the job limit), the best trial and
the warm-start checks against the parents' configs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tuning.conftest import fields, make_config
from trainops import SpecError
from trainops.tuning import CompletionReason, Search, TrialRecord, TrialStatus, check_warm_start
from trainops.tuning._completion import completion_details, completion_reason

DONE = TrialStatus.COMPLETED


def _records(*objectives: float | None, status: TrialStatus = DONE) -> list[TrialRecord]:
    return [TrialRecord(n, {}, status, value) for n, value in enumerate(objectives)]


def _criteria(**criteria: Any) -> Any:
    return make_config(completion_criteria=criteria)


def test_the_target_value_completes_in_the_objectives_direction() -> None:
    config = _criteria(target_objective_metric_value=0.5)  # Minimize
    assert completion_reason(config, _records(0.9, 0.6)) is None
    assert completion_reason(config, _records(0.9, 0.5)) is CompletionReason.TARGET
    maximize = make_config(
        objective={"metric_name": "loss", "type": "Maximize"},
        completion_criteria={"target_objective_metric_value": 0.5},
    )
    assert completion_reason(maximize, _records(0.4)) is None
    assert completion_reason(maximize, _records(0.4, 0.51)) is CompletionReason.TARGET


def test_not_improving_counts_trials_without_a_1_percent_gain() -> None:
    config = _criteria(
        best_objective_not_improving={"max_number_of_training_jobs_not_improving": 3}
    )
    # 1.0 -> 0.995 is under 1 %, so it does not reset the count; 0.98 does
    assert completion_reason(config, _records(1.0, 0.995, 1.2)) is None
    assert (
        completion_reason(config, _records(1.0, 0.995, 1.2, 1.0)) is CompletionReason.NOT_IMPROVING
    )
    assert completion_reason(config, _records(1.0, 0.995, 0.98, 1.2, 1.0)) is None
    details = completion_details(config, _records(1.0, 0.995, 0.98, 1.2, 1.0))
    assert details.number_of_training_jobs_objective_not_improving == 2
    failed = _records(None, None, None, status=TrialStatus.FAILED)
    assert completion_reason(config, [*_records(1.0), *failed[1:]]) is None  # failures not counted


def test_convergence_completes_only_when_enabled() -> None:
    flat = _records(*[1.0 - 0.1 * i for i in range(5)], *[0.6] * 5)
    improving = _records(*[1.0 - 0.05 * i for i in range(10)])
    enabled = _criteria(convergence_detected={"complete_on_convergence": "enabled"})
    assert completion_reason(enabled, flat) is CompletionReason.CONVERGED
    assert completion_reason(enabled, improving) is None
    assert completion_reason(enabled, flat[:9]) is None  # too few trials to tell
    disabled = _criteria(convergence_detected={"complete_on_convergence": "Disabled"})
    assert completion_reason(disabled, flat) is None
    assert completion_details(disabled, flat).convergence_detected


def test_the_job_limit_completes_once_every_trial_has_ended() -> None:
    config = make_config(resource_limits={"max_number_of_training_jobs": 3,
                                          "max_parallel_training_jobs": 1})  # fmt: skip
    running = [*_records(1.0, 2.0), TrialRecord(2, {}, TrialStatus.IN_PROGRESS)]
    assert completion_reason(config, running) is None
    ended = [*_records(1.0, 2.0), TrialRecord(2, {}, TrialStatus.FAILED)]
    assert completion_reason(config, ended) is CompletionReason.MAX_JOBS


def test_the_best_trial_counts_stopped_trials_and_skips_failed_and_nan(optuna: Any) -> None:
    search = Search(make_config())
    records = [
        TrialRecord(0, {}, TrialStatus.FAILED, 0.01),
        TrialRecord(1, {}, DONE, float("nan")),
        TrialRecord(2, {}, TrialStatus.STOPPED, None, {1: 0.9, 2: 0.3}),
        TrialRecord(3, {}, DONE, 0.3),
        TrialRecord(4, {}, DONE, 0.5),
    ]
    best = search.best(records)
    assert best is not None and best.number == 2  # the first of equal objectives
    assert search.best([]) is None


PARENT = {"warm_start_config": None, "tuning_job_name": "parent"}


def _child(kind: str, **changes: Any) -> Any:
    return make_config(
        warm_start_config={"parents": ["parent"], "warm_start_type": kind}, **changes
    )


def test_warm_start_accepts_a_compatible_parent() -> None:
    parent = make_config(**PARENT)
    check_warm_start(_child("IdenticalDataAndAlgorithm"), {"parent": parent})
    wider = dict(fields()["hyperparameter_ranges"], lr={"type": "Continuous", "min_value": 1e-5,
                                                         "max_value": 1})  # fmt: skip
    check_warm_start(_child("TransferLearning", hyperparameter_ranges=wider), {"parent": parent})
    check_warm_start(make_config(), {})  # no warm start, nothing to check


@pytest.mark.parametrize(
    ("kind", "changes", "reason"),
    [
        ("TransferLearning", {"objective": {"metric_name": "loss", "type": "Maximize"}},
         "its objective is Minimize loss, not Maximize loss"),
        ("TransferLearning", {"hyperparameter_ranges": {"lr": [0.1, 0.2], "batch_size": [16],
                                                        "optimizer": ["sgd"]}},
         "lr is Continuous there, Categorical here"),
        ("TransferLearning", {"training_job": dict(fields()["training_job"], hyperparameters={})},
         "it has 5 static and tuned hyperparameters, this job 3"),
        ("IdenticalDataAndAlgorithm", {"training_job": dict(fields()["training_job"],
                                                            inputs={"train": "s3://b/other/"})},
         "its training data (inputs) differ: use TransferLearning"),
        ("IdenticalDataAndAlgorithm", {"training_job": dict(fields()["training_job"],
                                                            entry_point="other.py")},
         "its algorithm (entry_point, source_dir) differs"),
    ],
)  # fmt: skip
def test_warm_start_refusals(kind: str, changes: dict[str, Any], reason: str) -> None:
    parent = make_config(**PARENT)
    with pytest.raises(SpecError) as caught:
        check_warm_start(_child(kind, **changes), {"parent": parent})
    assert "warm_start_config.parents.0" in str(caught.value)
    assert reason in str(caught.value)


def test_warm_start_refuses_an_unknown_parent_and_many_moves() -> None:
    with pytest.raises(SpecError, match="no tuning job named 'parent'"):
        check_warm_start(_child("TransferLearning"), {})
    statics = {f"s{i}": i for i in range(11)}
    tuned = {f"s{i}": [1, 2] for i in range(11)}
    job = dict(fields()["training_job"], hyperparameters=statics)
    parent = make_config(training_job=job, **PARENT)
    child = _child("TransferLearning", training_job=dict(job, hyperparameters={"a": 1, "b": 2, "c": 3}),
                   hyperparameter_ranges=tuned)  # fmt: skip
    with pytest.raises(SpecError, match="11 hyperparameters moved between static and tuned"):
        check_warm_start(child, {"parent": parent})
