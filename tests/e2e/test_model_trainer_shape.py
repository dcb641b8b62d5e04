"""The SageMaker SDK v3's ModelTrainer request shape, sent with botocore to a real `trainops
server`: the calls ``sagemaker-train`` 1.27.0 made in a real run (captured in
``fixtures/model_trainer/``: IAM's SimulatePrincipalPolicy, then a CreateTrainingJob with no
``sagemaker_submit_directory``, the code and the SDK's drivers as the channels ``code`` and
``sm_drivers``, and ``ContainerEntrypoint: ["/bin/bash"]`` with ``ContainerArguments`` that run
``/opt/ml/input/data/sm_drivers/sm_train.sh``). Only the S3 URIs are pointed at local
directories; the drivers are our own small ``sm_train.sh`` that reads what the SDK's reads (the
config files under /opt/ml/input/config, the code channel at /opt/ml/input/data/code, python3
on PATH). Where this machine cannot show /opt/ml, the job fails at once saying so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._harness import Server, tar_members
from tests.server.aws._clients import aws_client, sagemaker_client
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.server.aws import derive_credentials

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).with_name("fixtures") / "model_trainer"
WAIT = {"Delay": 1, "MaxAttempts": 180}

SM_TRAIN = """set -e
for name in resourceconfig inputdataconfig hyperparameters; do
    test -s "/opt/ml/input/config/$name.json"
done
cd /opt/ml/input/data/code
exec python3 train.py
"""

TRAIN = """import json, os
config = "/opt/ml/input/config"
hps = json.load(open(os.path.join(config, "hyperparameters.json")))
resources = json.load(open(os.path.join(config, "resourceconfig.json")))
channels = sorted(json.load(open(os.path.join(config, "inputdataconfig.json"))))
data = "/opt/ml/input/data/train"
total = sum(int(open(os.path.join(data, n)).read()) for n in sorted(os.listdir(data)))
print(f"epochs={hps['epochs']} total={total}", flush=True)
with open("/opt/ml/model/model.json", "w") as f:
    json.dump({"hyperparameters": hps, "host": resources["current_host"], "channels": channels,
               "total": total, "cwd": os.getcwd(), "model_dir": os.environ["SM_MODEL_DIR"]}, f)
"""


def _fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def _request(tmp_path: Path) -> dict[str, Any]:
    """The captured request, its S3 URIs pointed at local directories."""
    folders = {
        "train": tmp_path / "data",
        "code": tmp_path / "code",
        "sm_drivers": tmp_path / "drv",
    }
    for folder in folders.values():
        folder.mkdir()
    for i in range(3):
        (folders["train"] / f"part-{i}").write_text(str(i + 1))
    (folders["code"] / "train.py").write_text(TRAIN)
    (folders["sm_drivers"] / "sm_train.sh").write_text(SM_TRAIN)
    request = _fixture("create_training_job")
    for channel in request["InputDataConfig"]:
        uri = folders[channel["ChannelName"]].as_uri() + "/"
        channel["DataSource"]["S3DataSource"]["S3Uri"] = uri
    request["OutputDataConfig"]["S3OutputPath"] = (tmp_path / "out").as_uri()
    return request


def test_the_model_trainer_request_runs_its_container_command(tmp_path: Path) -> None:
    server = Server(tmp_path / "home").start()
    try:
        creds = derive_credentials((tmp_path / "home" / "token").read_text().strip())
        simulated = aws_client("iam", server.url, creds).simulate_principal_policy(
            **_fixture("simulate_principal_policy")
        )
        assert [r["EvalDecision"] for r in simulated["EvaluationResults"]] == ["allowed"]
        client = sagemaker_client(server.url, creds)
        request = _request(tmp_path)
        name = request["TrainingJobName"]
        client.create_training_job(**request)
        waiter = client.get_waiter("training_job_completed_or_stopped")
        waiter.wait(TrainingJobName=name, WaiterConfig=WAIT)
        job = client.describe_training_job(TrainingJobName=name)
    finally:
        server.kill()
    if not opt_ml_shown(True):
        assert job["TrainingJobStatus"] == "Failed"
        assert "/opt/ml" in job["FailureReason"]
        return
    assert job["TrainingJobStatus"] == "Completed", job.get("FailureReason")
    sent = request["AlgorithmSpecification"]
    for key in ("ContainerEntrypoint", "ContainerArguments"):
        assert job["AlgorithmSpecification"][key] == sent[key]
    model = json.loads(tar_members(job["ModelArtifacts"]["S3ModelArtifacts"])["model.json"])
    assert model["hyperparameters"] == {"epochs": "3"}  # the request's, no sagemaker_* added
    assert model["host"] == "algo-1"
    assert model["channels"] == ["code", "sm_drivers", "train"]
    assert model["total"] == 6
    assert (model["cwd"], model["model_dir"]) == ("/opt/ml/input/data/code", "/opt/ml/model")
