"""``HyperparameterTuner`` end to end: a tiny tuning job of real trials through an embedded
server, read back as the SDK reads it (describe, best job, best estimator, analytics, attach),
then warm started from; and a tuning job left running is stopped when its process exits."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.e2e._harness import cli_env, trainops
from trainops import HyperparameterTuner, TrainingJob
from trainops.sdk import (
    CategoricalParameter,
    ContinuousParameter,
    HyperparameterTuningJobAnalytics,
    WarmStartTypes,
)
from trainops.sdk._session import close_sessions

pytestmark = pytest.mark.slow

SCRIPT = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
parser.add_argument("--optimizer")
parser.add_argument("--epochs", type=int)
args = parser.parse_args()
for epoch in range(1, args.epochs + 1):
    bonus = 0.5 if args.optimizer == "adam" else 1.0
    print(f"epoch={epoch} loss={bonus * abs(args.lr - 0.01) + 1.0 / epoch:.6f}", flush=True)
"""
COLUMNS = [
    "lr", "optimizer", "TrainingJobName", "TrainingJobStatus", "FinalObjectiveValue",
    "TrainingStartTime", "TrainingEndTime", "TrainingElapsedTimeSeconds",
]  # fmt: skip


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory, holding train.py; sessions opened by the test are closed after it."""
    require_extra("tuning")
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        close_sessions()


def make_tuner(**extra: Any) -> HyperparameterTuner:
    job = TrainingJob(entry_point="train.py", hyperparameters={"epochs": 2, "lr": 0.5})
    return HyperparameterTuner(
        job,
        "loss",
        {
            "lr": ContinuousParameter(0.001, 0.1, "Logarithmic"),
            "optimizer": CategoricalParameter(["sgd", "adam"]),
        },
        metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
        strategy="Random",
        objective_type="Minimize",
        max_jobs=3,
        max_parallel_jobs=2,
        random_seed=5,
        **extra,
    )


def test_fit_runs_the_trials_and_the_sdk_reads_them_back(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pandas = require_extra("analytics")
    tuner = make_tuner(base_tuning_job_name="sdk")
    described = tuner.fit()
    name = tuner.latest_tuning_job.name if tuner.latest_tuning_job else ""
    assert name.startswith("sdk-") and len(name) <= 32
    assert described["HyperParameterTuningJobStatus"] == "Completed"
    assert described["TrainingJobStatusCounters"]["Completed"] == 3
    out = capsys.readouterr().out
    assert f"{name}: Completed (Completed 3, InProgress 0," in out
    assert f"{name}: MaxNumberOfTrainingJobsReached" in out

    trials = described["TrainingJobs"]
    losses = {t["TrainingJobName"]: t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
              for t in trials}  # fmt: skip
    best = tuner.best_training_job()
    assert losses[best] == min(losses.values())
    assert tuner.describe()["BestTrainingJob"]["TrainingJobName"] == best

    estimator = tuner.best_estimator()
    assert estimator.name == best
    tuned = next(t for t in trials if t["TrainingJobName"] == best)["TunedHyperParameters"]
    assert estimator.hyperparameters == {
        "epochs": 2, "lr": float(tuned["lr"]), "optimizer": tuned["optimizer"],
    }  # fmt: skip
    assert estimator.describe()["TrainingJobStatus"] == "Completed"
    assert estimator.metrics("loss")[-1]["Value"] == losses[best]

    frame = tuner.analytics().dataframe()
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 3
    assert frame["lr"].dtype == "float64"
    assert set(frame["optimizer"]) <= {"sgd", "adam"}
    assert dict(zip(frame["TrainingJobName"], frame["FinalObjectiveValue"], strict=True)) == losses
    assert set(frame["TrainingJobStatus"]) == {"Completed"}
    row = frame.iloc[0]
    assert isinstance(row["TrainingStartTime"], datetime)
    assert row["TrainingStartTime"].tzinfo is not None
    elapsed = (row["TrainingEndTime"] - row["TrainingStartTime"]).total_seconds()
    assert row["TrainingElapsedTimeSeconds"] == pytest.approx(elapsed)
    assert pandas.api.types.is_float_dtype(frame["TrainingElapsedTimeSeconds"])

    # Attached by name in a fresh tuner: the same job, ranges and limits, read from the store.
    close_sessions()
    attached = HyperparameterTuner.attach(name)
    assert attached.best_training_job() == best
    assert attached.max_jobs == 3 and attached.max_parallel_jobs == 2
    assert attached.objective_type == "Minimize" and attached.strategy == "Random"
    assert attached.hyperparameter_ranges() == tuner.hyperparameter_ranges()
    export = workdir / "trials.csv"
    HyperparameterTuningJobAnalytics(name).export_csv(export)
    assert export.read_text().splitlines()[0] == "," + ",".join(COLUMNS)

    # Warm started from it: the parent's trials count as earlier results.
    child = tuner.transfer_learning_tuner()
    child.max_jobs = 1
    child_described = child.fit(job_name="sdk-child", logs=False)
    assert child_described["HyperParameterTuningJobStatus"] == "Completed"
    assert child_described["WarmStartConfig"] == {
        "ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": name}],
        "WarmStartType": WarmStartTypes.TRANSFER_LEARNING.value,
    }
    overall = child_described["OverallBestTrainingJob"]["TrainingJobName"]
    assert losses.get(overall, 1e9) <= min(losses.values())
    assert capsys.readouterr().out == ""


def test_a_tuning_job_left_running_is_stopped_when_the_process_exits(
    tmp_path: Path, trainops_home: Path
) -> None:
    require_extra("tuning")
    (tmp_path / "train.py").write_text(
        "import time\nprint('loss=1', flush=True)\ntime.sleep(300)\n"
    )
    program = (
        "from trainops import HyperparameterTuner, TrainingJob\n"
        "from trainops.sdk import CategoricalParameter\n"
        "job = TrainingJob(entry_point='train.py',\n"
        "                  metric_definitions=[{'name': 'loss', 'regex': 'loss=([0-9]+)'}])\n"
        "tuner = HyperparameterTuner(job, 'loss', {'x': CategoricalParameter(['a', 'b'])},\n"
        "                            strategy='Grid', max_parallel_jobs=2)\n"
        "tuner.fit(job_name='left-running', wait=False)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=cli_env(trainops_home),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "stopping tuning job left-running: the embedded server ends" in result.stderr
    described = trainops("tuning", "describe", "left-running", home=trainops_home)
    assert '"HyperParameterTuningJobStatus": "Stopped"' in described.stdout, described.stderr


def test_fit_without_waiting_then_stop_and_wait(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "train.py").write_text("import time\nprint('loss=1', flush=True)\ntime.sleep(300)\n")
    job = TrainingJob(
        entry_point="train.py",
        metric_definitions=[{"name": "loss", "regex": "loss=([0-9]+)"}],  # type: ignore[list-item]
    )
    tuner = HyperparameterTuner(
        job, "loss", {"x": CategoricalParameter(["a", "b", "c"])}, strategy="Grid",
        max_parallel_jobs=2,
    )  # fmt: skip
    first = tuner.fit(job_name="sdk-stop", wait=False)
    assert first["HyperParameterTuningJobName"] == "sdk-stop"
    assert first["HyperParameterTuningJobStatus"] == "InProgress"
    assert tuner.stop_tuning_job()["HyperParameterTuningJobStatus"] == "Stopping"
    final = tuner.wait()
    assert final["HyperParameterTuningJobStatus"] == "Stopped"
    assert final["TrainingJobStatusCounters"]["InProgress"] == 0
    assert tuner.describe()["HyperParameterTuningJobStatus"] == "Stopped"
    assert "sdk-stop: Stopped (" in capsys.readouterr().out
