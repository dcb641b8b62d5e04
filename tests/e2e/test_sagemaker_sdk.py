"""The real SageMaker Python SDK v2 drives `trainops server --s3` unchanged: its PyTorch estimator
uploads ``source_dir`` to the served S3, CreateTrainingJob runs it on the Python the server's
``images`` setting maps its image to, ``fit(wait=True, logs="All")`` follows it to Completed
(DescribeTrainingJob, and its log from CloudWatch Logs), ``model_data`` is the model the script
wrote and ``training_job_analytics`` reads its metric from CloudWatch metrics; ``PyTorch.attach``
rebuilds the estimator from DescribeTrainingJob, a HyperparameterTuner runs two trials (on the
Python the image maps to, a Categorical value reaching the script bare), its analytics'
dataframe lists them, ``HyperparameterTuner.attach`` rebuilds it and ``best_estimator``
attaches to its best trial; an estimator with ``distribution`` of SageMaker's data parallel
library runs a script written for it (``torch_smddp``, backend ``smddp``). The user's only
changes are the environment variables the server prints (the profile, and the SDK's defaults
file), and one SDK setting: its source tarball is uploaded with SSE-KMS unless
``encrypt_repacked_artifacts`` is off, and the served SeaweedFS has no KMS.

The SDK runs in a child process: it is what a user runs, it imports much (and warns on import,
which this suite makes errors), and it must see only the variables the banner prints.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require, require_installed
from tests.e2e._harness import Server, cli_env, run_client, wait_for
from trainops.storage._seaweed import read_client_file

pytestmark = [pytest.mark.slow, pytest.mark.s3]

TRAIN = """
import argparse, json, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int)
parser.add_argument("--label")
args = parser.parse_args()
channel = os.environ["SM_CHANNEL_TRAIN"]
total = sum(int(open(os.path.join(channel, n)).read()) for n in sorted(os.listdir(channel)))
for epoch in range(args.epochs):
    print(f"epoch={epoch} loss={1.0 / (epoch + 1 + total):.4f}", flush=True)
model = {"total": total, "label": args.label, "region": os.environ.get("AWS_REGION"),
         "python": sys.executable, "hps": json.loads(os.environ["SM_HPS"])}
json.dump(model, open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w"))
"""

# A script of SageMaker's data parallel library, as its guide writes one (on a CPU: gloo).
SMDDP = """
import json, os
import smdistributed.dataparallel.torch.torch_smddp
import torch, torch.distributed as dist
dist.init_process_group(backend="smddp")
total = torch.ones(1)
dist.all_reduce(total)
model = {"backend": dist.get_backend(), "world": dist.get_world_size(), "sum": total.item(),
         "single": os.environ.get("SMDATAPARALLEL_USE_SINGLENODE"),
         "flag": json.loads(os.environ["SM_FRAMEWORK_PARAMS"]).get(
             "sagemaker_distributed_dataparallel_enabled")}
json.dump(model, open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w"))
"""

DRIVER = """
import json, sys
import boto3, sagemaker
from sagemaker.pytorch import PyTorch
from sagemaker.session_settings import SessionSettings
from sagemaker.tuner import (
    CategoricalParameter, HyperparameterTuner, InstanceConfig, IntegerParameter,
)
from sagemaker.analytics import HyperparameterTuningJobAnalytics

boto = boto3.Session()
s3 = boto.client("s3")
for i in range(3):
    s3.put_object(Bucket="trainops", Key=f"data/train/part-{i}", Body=str(i + 1).encode())
session = sagemaker.Session(
    boto_session=boto, settings=SessionSettings(encrypt_repacked_artifacts=False)
)
estimator = PyTorch(
    entry_point="train.py",
    source_dir=sys.argv[1],
    role="arn:aws:iam::000000000000:role/SageMakerRole",
    framework_version="2.3",
    py_version="py311",
    instance_count=1,
    instance_type="ml.m5.large",
    hyperparameters={"epochs": 3, "label": "sdk run"},
    metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
    sagemaker_session=session,
)
estimator.fit({"train": "s3://trainops/data/train/"}, wait=True, logs="All")
job = estimator.latest_training_job.describe()
metrics = estimator.training_job_analytics.dataframe()
attached = PyTorch.attach(estimator.latest_training_job.name, sagemaker_session=session)
tuner = HyperparameterTuner(
    estimator,
    objective_metric_name="loss",
    # the SDK sends a Categorical's values JSON-encoded ('"tuned a"'): the script gets them bare
    hyperparameter_ranges={
        "epochs": IntegerParameter(1, 4),
        "label": CategoricalParameter(["tuned a", "tuned b"]),
    },
    metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
    objective_type="Minimize",
    strategy="Random",
    max_jobs=2,
    max_parallel_jobs=2,
)
# the SDK sends a tuner's instances as HyperParameterTuningResourceConfig: the trials run on them
tuner.override_resource_config(
    instance_configs=[InstanceConfig(instance_count=1, instance_type="ml.m5.xlarge", volume_size=30)]
)
tuner.fit({"train": "s3://trainops/data/train/"}, wait=True)
trials = HyperparameterTuningJobAnalytics(
    tuner.latest_tuning_job.name, sagemaker_session=session
).dataframe()
tuner_attached = HyperparameterTuner.attach(tuner.latest_tuning_job.name, sagemaker_session=session)
best = tuner.best_estimator()  # attaches to the best trial: json-decodes its HyperParameters
smddp = PyTorch(
    entry_point="smddp.py",
    source_dir=sys.argv[1],
    role="arn:aws:iam::000000000000:role/SageMakerRole",
    framework_version="2.2.0",  # one the SDK allows smdataparallel with (its image: torch)
    py_version="py310",
    instance_count=1,
    instance_type="ml.m5.xlarge",
    distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
    disable_output_compression=True,  # OutputDataConfig.CompressionType NONE: files, no tarball
    sagemaker_session=session,
)
smddp.fit(wait=True, logs="None")
print(json.dumps({
    "metrics": sorted(set(metrics["metric_name"])),
    "values": len(metrics),
    "bucket": session.default_bucket(),
    "model_data": estimator.model_data,
    "name": estimator.latest_training_job.name,
    "status": job["TrainingJobStatus"],
    "smddp_model_data": smddp.model_data,
    "trials": {
        "statuses": sorted(trials["TrainingJobStatus"]),
        "objectives": len(trials["FinalObjectiveValue"].dropna()),
        "epochs": sorted(int(e) for e in trials["epochs"]),
    },
    "best": {
        "instance_type": best.instance_type,
        "tuning_resources": tuner.describe()["TrainingJobDefinition"].get(
            "HyperParameterTuningResourceConfig"
        ),
        "model_data": best.model_data,
        "entry_point": best.entry_point,
        "label": best.hyperparameters()["label"],
    },
    "tuner_attached": {
        "estimator": type(tuner_attached.estimator).__name__,
        "role": tuner_attached.estimator.role,
        "max_jobs": tuner_attached.max_jobs,
    },
    "attached": {
        "model_data": attached.model_data,
        "entry_point": attached.entry_point,
        "framework_version": attached.framework_version,
        "hyperparameters": attached.hyperparameters(),
    },
}))
"""


def _sdk_env(home: Path) -> dict[str, str]:
    """The variables the server's banner prints, and nothing else of AWS's."""
    aws = home / "aws"
    return cli_env(
        home,
        AWS_SHARED_CREDENTIALS_FILE=str(aws / "credentials"),
        AWS_CONFIG_FILE=str(aws / "config"),
        AWS_PROFILE="trainops",
        SAGEMAKER_USER_CONFIG_OVERRIDE=str(aws / "sagemaker.yaml"),
        SAGEMAKER_SUPPRESS_V2_WARNING="1",
        PYTHONPATH=os.environ.get("PYTHONPATH", ""),
    )


def _model(home: Path, uri: str) -> Any:
    import botocore.session  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    s3 = read_client_file(home)
    assert s3 is not None
    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
        config=Config(s3={"addressing_style": "path"}),
    )
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    if key.endswith(".json"):  # a file of an uncompressed model
        return json.loads(body)
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        handle = tar.extractfile("model.json")
        assert handle is not None
        return json.load(handle)


def test_the_sdk_v2_pytorch_estimator_fits_on_trainops_and_reads_its_model(
    tmp_path: Path,
) -> None:
    require("weed")
    require_installed("dev", "sagemaker")
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(TRAIN)
    (source / "smddp.py").write_text(SMDDP)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    # The image the estimator names (pytorch-training:2.3.0-cpu-py311) runs on the Python the
    # server's images setting maps it to: here a bare venv's (the script needs only stdlib).
    venv = tmp_path / "torch23"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    home = tmp_path / "home"
    images = f"pytorch:2.3={python},pytorch:2.2=server,sklearn=server"
    server = Server(home, TRAINOPS_S3_SERVE="1", TRAINOPS_IMAGES=images).start()
    try:
        wait_for(lambda: read_client_file(home), timeout=120)
        wait_for(lambda: (home / "aws" / "sagemaker.yaml").is_file(), timeout=30)
        result, done = run_client(
            [sys.executable, str(driver), str(source)], _sdk_env(home), tmp_path
        )
        assert result["bucket"] == "trainops"
        assert result["status"] == "Completed"
        # logs="All": the script's lines, streamed from CloudWatch Logs as the SDK reads them
        assert "epoch=2 loss=0.1111" in done.stdout
        # training_job_analytics: the metric from metric_definitions, via CloudWatch metrics
        assert result["metrics"] == ["loss"] and result["values"] >= 1
        name = result["name"]
        assert result["model_data"] == f"s3://trainops/{name}/output/model.tar.gz"
        # Estimator.attach: the estimator rebuilt from DescribeTrainingJob, as the SDK does it
        attached = result["attached"]
        assert attached["model_data"] == result["model_data"]
        assert (attached["entry_point"], attached["framework_version"]) == ("train.py", "2.3")
        assert json.loads(attached["hyperparameters"]["label"]) == "sdk run"
        # a HyperparameterTuner of 2 trials, its analytics' dataframe, and its attach
        trials = result["trials"]
        assert trials["statuses"] == ["Completed", "Completed"] and trials["objectives"] == 2
        assert all(1 <= epochs <= 4 for epochs in trials["epochs"])
        assert result["tuner_attached"] == {
            "estimator": "PyTorch",
            "role": "arn:aws:iam::000000000000:role/SageMakerRole",
            "max_jobs": 2,
        }
        model = _model(home, result["model_data"])
        # SM_HPS as the toolkit reads the SDK's JSON-encoded values: "3" the number, '"sdk run"'
        # the string
        assert model.pop("hps") == {"epochs": 3, "label": "sdk run"}
        assert model == {"total": 6, "label": "sdk run", "region": "us-east-1", "python": python}
        # tuner.best_estimator(): the best trial attached, its model the one the trial wrote on
        # the Python the image maps to, with the Categorical value bare (the toolkit's reading)
        best = result["best"]
        assert best["instance_type"] == "ml.m5.xlarge"  # the trial's own ResourceConfig
        assert best["tuning_resources"]["InstanceConfigs"] == [
            {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}
        ]  # given back as the SDK sent it
        assert best["entry_point"] == "train.py" and best["label"] in ('"tuned a"', '"tuned b"')
        trial_model = _model(home, best["model_data"])
        assert trial_model["label"] == json.loads(best["label"])
        assert trial_model["hps"]["label"] == trial_model["label"]
        assert isinstance(trial_model["hps"]["epochs"], int)
        assert trial_model["python"] == python
        # distribution={"smdistributed": {"dataparallel": ...}}: the library's script ran;
        # disable_output_compression: model_data is the SDK's uncompressed model source, whose
        # prefix holds the script's file as it wrote it
        source = result["smddp_model_data"]["S3DataSource"]
        assert (source["S3DataType"], source["CompressionType"]) == ("S3Prefix", "None")
        assert source["S3Uri"].startswith("s3://trainops/")
        assert source["S3Uri"].endswith("/output/model/")
        assert _model(home, source["S3Uri"] + "model.json") == {
            "backend": "smddp",
            "world": 1,
            "sum": 1.0,
            "single": "1",
            "flag": True,
        }
    finally:
        server.stop()
