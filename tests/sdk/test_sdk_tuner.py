"""``HyperparameterTuner`` without running trials: its arguments become a tuning job's config
(refusals name the SDK's arguments), warm start tuners, ``attach`` and the analytics read back
from a tuning job recorded in the home's store (no server is started to read)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require_extra
from trainops import HyperparameterTuner, MetricDefinition, SpecError, TrainingJob, TrainopsError
from trainops._settings import Settings
from trainops.sdk import (
    CategoricalParameter,
    ContinuousParameter,
    HyperbandStrategyConfig,
    HyperparameterTuningJobAnalytics,
    IntegerParameter,
    StrategyConfig,
    TuningJobCompletionCriteriaConfig,
    WarmStartConfig,
    WarmStartTypes,
)
from trainops.sdk._tuner import LatestTuningJob
from trainops.store import MetadataStore, TuningTrialRecord

JOB = TrainingJob(
    entry_point="train.py",
    hyperparameters={"epochs": 4, "lr": 0.5},
    metric_definitions=[MetricDefinition(name="loss", regex="loss=([0-9.]+)")],
)
RANGES = {
    "lr": ContinuousParameter(1e-4, 0.1, "Logarithmic"),
    "batch": IntegerParameter(16, 128),
    "optimizer": CategoricalParameter(["sgd", "adam"]),
}


def tuner(**changes: Any) -> HyperparameterTuner:
    arguments: dict[str, Any] = {
        "estimator": JOB,
        "objective_metric_name": "loss",
        "hyperparameter_ranges": RANGES,
        "objective_type": "Minimize",
        "max_jobs": 4,
        "random_seed": 7,
    }
    return HyperparameterTuner(**(arguments | changes))


def problems(**changes: Any) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        tuner(**changes)
    return caught.value.problems


def test_the_arguments_make_the_tuning_job_a_yaml_declares() -> None:
    made = tuner(
        max_parallel_jobs=2,
        max_runtime_in_seconds=600,
        early_stopping_type="auto",
        completion_criteria_config=TuningJobCompletionCriteriaConfig(3, True, 0.05),
        metric_definitions=[{"Name": "val", "Regex": "val=([0-9.]+)"}],
        objective_metric_name="val",
    )
    config = made._config(JOB, "named")
    assert config.tuning_job_name == "named"
    assert config.objective.metric_name == "val" and config.objective.type.value == "Minimize"
    assert [m.name for m in config.training_job.metric_definitions] == ["val"]
    assert config.static_hyperparameters == {"epochs": 4}  # lr is tuned: not static
    assert config.resource_limits.model_dump() == {
        "max_number_of_training_jobs": 4,
        "max_parallel_training_jobs": 2,
        "max_runtime_in_seconds": 600,
    }
    assert config.training_job_early_stopping_type.value == "Auto"
    criteria = config.completion_criteria
    assert criteria is not None and criteria.model_dump(mode="json") == {
        "target_objective_metric_value": 0.05,
        "best_objective_not_improving": {"max_number_of_training_jobs_not_improving": 3},
        "convergence_detected": {"complete_on_convergence": "Enabled"},
    }
    assert config.random_seed == 7 and config.strategy.value == "Bayesian"


def test_max_jobs_defaults_as_in_the_sdk() -> None:
    assert tuner(max_jobs=None)._config(JOB, None).max_training_jobs == 1
    grid = HyperparameterTuner(
        JOB, "loss", {"optimizer": CategoricalParameter(["sgd", "adam", "rms"])}, strategy="Grid"
    )
    assert grid._config(JOB, None).max_training_jobs == 3


def test_refusals_name_the_tuner_s_arguments() -> None:
    assert [p for p, _ in problems(max_jobs=0, max_parallel_jobs=101)] == [
        "max_jobs",
        "max_parallel_jobs",
    ]
    assert problems(objective_type="Smallest")[0][0] == "objective_type"
    missing = problems(objective_metric_name="acc")
    assert (
        missing[0][0] == "objective_metric_name"
        and "'acc' has no metric definition" in (missing[0][1])
    )
    assert problems(early_stopping_type="Sometimes")[0][0] == "early_stopping_type"
    hyperband = problems(strategy="Hyperband", early_stopping_type="Auto")
    assert hyperband[0][0] == "early_stopping_type"
    assert problems(strategy="Grid")[0] == (
        "hyperparameter_ranges.batch",
        "Grid takes Categorical ranges only, not Integer: list the values to try (e.g. "
        "[0.01, 0.1]) or use strategy: Bayesian",
    )
    assert problems(metric_definitions=[{"Name": "loss", "Regex": "loss=(.*"}])[0][0] == (
        "metric_definitions.0.regex"
    )
    assert problems(metric_definitions="loss")[0][0] == "metric_definitions"
    assert problems(metric_definitions=[3])[0] == (
        "metric_definitions.0",
        "int: each is a dict with 'Name' and 'Regex'",
    )
    assert problems(tags=[{"Key": "team", "Value": "a"}])[0] == (
        "tags",
        "a tuning job's tags has no meaning in trainops (no AWS account is involved); remove it",
    )
    assert problems(base_tuning_job_name="my_tune")[0][0] == "base_tuning_job_name"
    for arguments in ({"tags": [{"Key": "a"}]}, {"metric_definitions": [3]}, {"estimator": "x"}):
        with pytest.raises(SpecError, match=r"^invalid tuning job:\n"):  # never "job spec"
            HyperparameterTuner(**{"estimator": JOB, "objective_metric_name": "loss",
                                   "hyperparameter_ranges": RANGES, **arguments})  # fmt: skip
    assert problems(estimator="train.py")[0] == (
        "estimator",
        "a TrainingJob (or JobSpec), not a str",
    )
    assert problems(random_seed=-1)[0][0] == "random_seed"
    ranges = {**RANGES, "lr": {"type": "Continuous", "min_value": 0, "max_value": 1,
                               "scaling_type": "Logarithmic"}}  # fmt: skip
    with pytest.raises(
        SpecError, match=r"^invalid tuning job:\n  hyperparameter_ranges\.lr\.min_value: .*above 0"
    ):
        HyperparameterTuner(JOB, "loss", ranges, max_jobs=2)


def test_fit_refuses_a_missing_local_channel_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trainops_home: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    made = tuner()
    with pytest.raises(SpecError) as caught:
        made.fit({"train": "data/"})
    assert str(caught.value).startswith("invalid tuning job:\n")
    assert caught.value.problems == [
        ("estimator.inputs.train.uri", f"channel 'train': {tmp_path}/data/ does not exist")
    ]
    (tmp_path / "train.py").unlink()
    with pytest.raises(SpecError, match=r"estimator\.entry_point"):
        made.fit()
    assert made.latest_tuning_job is None
    assert not (trainops_home / "trainops.db").exists()  # no control plane was started


def test_methods_that_need_a_tuning_job_say_so() -> None:
    made = tuner()
    for call in (made.describe, made.wait, made.stop_tuning_job, made.best_training_job,
                 made.best_estimator, made.analytics, made.transfer_learning_tuner,
                 made.identical_dataset_and_algorithm_tuner):  # fmt: skip
        with pytest.raises(TrainopsError, match=r"started no tuning job yet; call fit\(\) first"):
            call()


def test_warm_start_config_and_tuners() -> None:
    config = WarmStartConfig(WarmStartTypes.TRANSFER_LEARNING, {"p2", "p1"})
    assert config.type is WarmStartTypes.TRANSFER_LEARNING and config.parents == ["p1", "p2"]
    assert [t.value for t in WarmStartTypes] == ["IdenticalDataAndAlgorithm", "TransferLearning"]
    with pytest.raises(SpecError, match="parents"):
        WarmStartConfig("TransferLearning", [])
    made = tuner()
    made.latest_tuning_job = LatestTuningJob("parent")  # as fit() sets it
    child = made.transfer_learning_tuner(additional_parents={"other"})
    assert child.warm_start_config is not None
    assert child.warm_start_config.parents == ["other", "parent"]
    assert child.warm_start_config.warm_start_type is WarmStartTypes.TRANSFER_LEARNING
    assert child.hyperparameter_ranges() == made.hyperparameter_ranges()
    assert child.estimator is JOB and child.latest_tuning_job is None
    same = made.identical_dataset_and_algorithm_tuner()
    assert same.warm_start_config == WarmStartConfig("IdenticalDataAndAlgorithm", ["parent"])


def recorded(home: Path, made: HyperparameterTuner, name: str) -> MetadataStore:
    """``made``'s tuning job recorded in the home's store, with two ended trials."""
    config = made._config(JOB, name).model_dump(mode="json", exclude_none=True)
    store = MetadataStore(Settings.load().db_path)
    store.create_tuning_job(name, config, "file:///code.tar.gz", time.time())
    for number, (lr, objective) in enumerate([(0.01, 0.25), (0.001, 0.5)]):
        hyperparameters = {"lr": lr, "batch": 32, "optimizer": "adam"}
        job = f"{name}-{number + 1:03d}"
        store.add_trial(TuningTrialRecord(name, number, job, hyperparameters, "Pending", 1.0))
        store.update_trial(name, number, status="Completed", objective=objective, end_time=2.0)
    return store


def test_attach_and_analytics_read_the_store_without_a_server(trainops_home: Path) -> None:
    require_extra("tuning")
    pandas = require_extra("analytics")
    made = tuner(
        strategy="Hyperband",
        strategy_config=StrategyConfig(
            hyperband_strategy_config=HyperbandStrategyConfig(min_resource=2)
        ),
        completion_criteria_config=TuningJobCompletionCriteriaConfig(target_objective_metric_value=0.1),
        warm_start_config=WarmStartConfig("TransferLearning", ["old"]),
    )  # fmt: skip
    recorded(trainops_home, made, "stored").close()
    attached = HyperparameterTuner.attach("stored")
    assert attached.estimator is None
    assert attached.hyperparameter_ranges() == made.hyperparameter_ranges()
    for field in ("objective_metric_name", "max_jobs", "max_parallel_jobs", "random_seed",
                  "strategy_config", "completion_criteria_config", "warm_start_config"):  # fmt: skip
        assert getattr(attached, field) == getattr(made, field), field
    assert (attached.strategy, attached.objective_type) == ("Hyperband", "Minimize")
    assert attached.best_training_job() == "stored-001"
    with pytest.raises(TrainopsError, match="attached by name"):
        attached.best_estimator()
    with pytest.raises(TrainopsError, match="pass estimator= to transfer_learning_tuner"):
        attached.identical_dataset_and_algorithm_tuner()
    assert attached.transfer_learning_tuner(estimator=JOB).estimator is JOB

    analytics = HyperparameterTuningJobAnalytics("stored")
    frame = analytics.dataframe()
    assert list(frame.columns) == [
        "batch", "lr", "optimizer", "TrainingJobName", "TrainingJobStatus", "FinalObjectiveValue",
        "TrainingStartTime", "TrainingEndTime", "TrainingElapsedTimeSeconds",
    ]  # fmt: skip
    assert frame["batch"].tolist() == [32.0, 32.0]  # cast to float, as the SDK does
    assert frame["lr"].tolist() == [0.01, 0.001]
    assert frame["FinalObjectiveValue"].tolist() == [0.25, 0.5]
    assert frame["TrainingElapsedTimeSeconds"].isna().all()  # no start time: never started
    assert analytics.tuning_ranges["batch"] == {
        "Name": "batch", "MinValue": "16", "MaxValue": "128", "ScalingType": "Auto",
    }  # fmt: skip
    assert analytics.dataframe() is frame  # cached until refreshed
    assert analytics.dataframe(force_refresh=True) is not frame
    assert isinstance(frame, pandas.DataFrame)
    assert not (trainops_home / "server.json").exists()  # nothing was started to read


def test_analytics_without_pandas_says_how_to_install_it(
    trainops_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_extra("tuning")
    recorded(trainops_home, tuner(), "nopandas").close()
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    analytics = HyperparameterTuningJobAnalytics("nopandas")
    assert len(analytics.training_job_summaries()) == 2
    with pytest.raises(TrainopsError, match=r"pip install 'trainops\[analytics\]'"):
        analytics.dataframe()


def test_an_unknown_tuning_job_is_a_clear_error(trainops_home: Path) -> None:
    with pytest.raises(TrainopsError, match="no tuning job named 'nope'"):
        HyperparameterTuner.attach("nope")
    with pytest.raises(TrainopsError, match="no tuning job named 'nope'"):
        HyperparameterTuningJobAnalytics("nope").dataframe()
