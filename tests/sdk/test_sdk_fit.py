"""``TrainingJob.fit`` end to end: real embedded server, real agent, real job."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._harness import cli_env, describe
from trainops import Channel, MetricDefinition, SpecError, TrainingJob, UnexpectedStatusError
from trainops.sdk._session import close_sessions

pytestmark = pytest.mark.slow

SCRIPT = """
import os
print("epochs", os.environ["SM_HP_EPOCHS"])
print("accuracy=0.75", flush=True)
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory, holding train.py; sessions opened by the test are closed after it."""
    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        close_sessions()


def test_fit_runs_the_job_and_prints_its_log(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = TrainingJob(
        entry_point="train.py",
        base_job_name="sdk",
        hyperparameters={"epochs": 2},
        metric_definitions=[MetricDefinition(name="accuracy", regex="accuracy=([0-9.]+)")],
        role="arn:aws:iam::123456789012:role/SageMakerRole",
    )
    description = job.fit()
    assert job.name is not None and job.name.startswith("sdk-")
    assert description["TrainingJobName"] == job.name
    assert description["TrainingJobStatus"] == "Completed"
    assert job.latest_training_job is job
    assert job.model_data == description["ModelArtifacts"]["S3ModelArtifacts"]
    assert job.model_data.endswith(f"/{job.name}/output/model.tar.gz")
    captured = capsys.readouterr()
    assert captured.err.startswith("note: role is accepted and not used: ")
    out = captured.out.splitlines()
    assert "[algo-1] epochs 2" in out
    assert any(line.endswith(" Completed: Training job completed") for line in out)
    assert [(m["MetricName"], m["Value"]) for m in job.metrics()] == [("accuracy", 0.75)]
    script_lines = [line["line"] for line in job.logs()["lines"] if line["stream"] == "stdout"]
    assert script_lines == ["epochs 2", "accuracy=0.75"]
    assert job.describe()["FinalMetricDataList"][0]["Value"] == 0.75


def test_fit_refuses_a_missing_local_channel_before_anything_starts(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINOPS_HOME", str(workdir / "home"))
    job = TrainingJob(entry_point="train.py", inputs={"train": Channel("data/trian/")})
    with pytest.raises(SpecError) as caught:
        job.fit({"test": "data/test/"})
    assert caught.value.problems == [
        ("inputs.test.uri", f"channel 'test': {workdir}/data/test/ does not exist")
    ]
    with pytest.raises(SpecError, match=r"channel 'train': .*/data/trian/ does not exist"):
        job.fit()
    assert job.name is None
    assert not (workdir / "home").exists()  # no control plane was started, no job created


def test_fit_without_waiting_then_wait(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = TrainingJob(entry_point="train.py", hyperparameters={"epochs": 1})
    first = job.fit(wait=False)
    assert first["TrainingJobName"] == job.name
    assert first["TrainingJobStatus"] in ("InProgress", "Completed")
    assert job.wait(logs=False)["TrainingJobStatus"] == "Completed"
    assert capsys.readouterr().out == ""


def test_a_failed_job_raises_as_the_sdk_does_with_its_reason_and_description(
    workdir: Path,
) -> None:
    (workdir / "fails.py").write_text("import sys\nsys.exit('no data in the channel')\n")
    job = TrainingJob(entry_point="fails.py", job_name="sdk-fails")
    with pytest.raises(UnexpectedStatusError) as caught:
        job.fit(logs=False)
    error = caught.value
    assert str(error).startswith("Error for Training job sdk-fails: Failed. Reason: ")
    assert error.actual_status == "Failed"
    assert error.allowed_statuses == ("Completed", "Stopped")
    assert error.description["TrainingJobName"] == "sdk-fails"
    assert error.description["FailureReason"] in str(error)
    with pytest.raises(UnexpectedStatusError):  # wait() again says the same
        job.wait(logs=False)


def test_a_job_left_running_is_stopped_when_the_process_exits(
    tmp_path: Path, trainops_home: Path
) -> None:
    (tmp_path / "train.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(300)\n")
    program = (
        "from trainops import TrainingJob\n"
        "job = TrainingJob(entry_point='train.py', job_name='left-running')\n"
        "job.fit(wait=False)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=cli_env(trainops_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "stopping job left-running: the embedded server ends with this process" in result.stderr
    job = describe("left-running", trainops_home)
    assert job["TrainingJobStatus"] == "Stopped"


CHANNEL_SCRIPT = """
import os
train = os.environ["SM_CHANNEL_TRAIN"]
print("files", sorted(os.listdir(train)), os.environ["SM_CURRENT_INSTANCE_TYPE"], flush=True)
"""


def test_fit_takes_sdk_style_inputs_on_a_local_instance(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a SageMaker user writes it: ``instance_type="local"``, ``fit({"train": "<uri>"})``."""
    (workdir / "train.py").write_text(CHANNEL_SCRIPT)
    (workdir / "data").mkdir()
    (workdir / "data" / "a.csv").write_text("1,2\n")
    job = TrainingJob(entry_point="train.py", instance_type="local")
    description = job.fit({"train": "data/"}, logs="All", job_name="sdk-local-inputs")
    assert job.name == "sdk-local-inputs"
    assert description["TrainingJobStatus"] == "Completed"
    assert "[algo-1] files ['a.csv'] local" in capsys.readouterr().out.splitlines()
    assert description["InputDataConfig"][0]["ChannelName"] == "train"
    assert job.inputs == {}
