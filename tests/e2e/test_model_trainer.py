"""The real SageMaker Python SDK v3 (``sagemaker-train``'s ``ModelTrainer``) drives `trainops
server --s3`: a client script run in the SDK's own venv (``.venv-sdk3``, built by ``make
install-sdk3`` from requirements-sdk3.txt: the v3 SDK cannot share .venv with the v2 one) uploads
its data to the served S3, and ``ModelTrainer(source_code=SourceCode(source_dir=…), compute=
Compute(…), environment=…, stopping_condition=…, checkpoint_config=…).train([InputData(…)],
wait=True, logs=True)`` (a channel from S3, one from a local directory, which the SDK uploads)
creates the job (the SDK uploads the
code and its drivers, checks the role with IAM, runs ``sm_train.sh`` as the container command),
follows it to Completed printing its log from CloudWatch Logs, and the client reads the model
back from S3. Every endpoint reaches trainops through the ``AWS_ENDPOINT_URL_<service>`` variables
alone (no config file: the profile gives only the key), as a user keeps their own AWS config. A
second run uses ``distributed=Torchrun()`` on two hosts, which the SDK's drivers start with
``torchrun`` on each host. A third tunes the trainer with the SDK v3's ``HyperparameterTuner``
and reads its best trial's model back.

The replay of the same requests with botocore (test_model_trainer_shape.py) stays: it runs where
the SDK v3's venv is not built. One server serves both runs here (neither needs a fresh one).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require, require_installed, require_sdk3
from tests.e2e._harness import Server, cli_env, run_client, wait_for
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.storage._seaweed import read_client_file

pytestmark = [pytest.mark.slow, pytest.mark.s3]

TRAIN = """
import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int)
args = parser.parse_args()
channel = os.environ["SM_CHANNEL_TRAIN"]
total = sum(int(open(os.path.join(channel, n)).read()) for n in sorted(os.listdir(channel)))
for epoch in range(args.epochs):
    print(f"epoch={epoch} loss={1.0 / (epoch + 1 + total):.4f}", flush=True)
local = os.environ["SM_CHANNEL_LOCAL"]
notes = {n: open(os.path.join(local, n)).read() for n in sorted(os.listdir(local))}
model = {"total": total, "epochs": args.epochs, "hps": json.loads(os.environ["SM_HPS"]),
         "cwd": os.getcwd(), "model_dir": os.environ["SM_MODEL_DIR"], "local": notes,
         "greeting": os.environ.get("GREETING")}
with open("/opt/ml/checkpoints/step-3.txt", "w") as out:
    out.write(str(total))
import tinyjobpkg  # SourceCode(requirements=): installed by the SDK's drivers before this ran
model["package"] = [tinyjobpkg.VALUE, tinyjobpkg.__file__]
json.dump(model, open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w"))
"""

# torchrun's agents on the two hosts meet at algo-1:7777 (the drivers' master address and port)
# before either starts the script: that rendezvous is what this proves, and the ranks and world
# size it hands out. The script itself imports no torch (the collectives between hosts are
# tests/distributed's), which keeps two torch imports out of the suite's time.
TRAIN_DDP = """
import json, os
keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
seen = {key: os.environ[key] for key in keys}
print(f"rank={seen['RANK']} world={seen['WORLD_SIZE']} node={seen['GROUP_RANK']}", flush=True)
if seen["RANK"] == "0":
    json.dump(seen, open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w"))
"""


# What a user writes: the SDK's INFO log shown (where train(logs=True) prints the job's lines),
# data put in S3, a ModelTrainer trained on it, and its model read back.
CLIENT = """
import io, json, logging, os, sys, tarfile
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
import boto3
from sagemaker.train import ModelTrainer
from sagemaker.core.training.configs import (
    CheckpointConfig, Compute, InputData, OutputDataConfig, SourceCode, StoppingCondition,
)
from sagemaker.train.distributed import Torchrun

source_dir, base_name, hosts, torchrun = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
channels = [InputData(channel_name="train", data_source="s3://trainops/data/train/")]
if len(sys.argv) > 5:  # a local directory: the SDK uploads it to the default bucket
    channels.append(InputData(channel_name="local", data_source=sys.argv[5]))
s3 = boto3.client("s3")
for i in range(3):
    s3.put_object(Bucket="trainops", Key=f"data/train/part-{i}", Body=str(i + 1).encode())
trainer = ModelTrainer(
    training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311",
    source_code=SourceCode(
        source_dir=source_dir,
        entry_script="train.py",
        requirements="requirements.txt"
        if os.path.exists(os.path.join(source_dir, "requirements.txt"))
        else None,
    ),
    role="arn:aws:iam::000000000000:role/SageMakerRole",
    compute=Compute(instance_type="ml.m5.large", instance_count=hosts),
    hyperparameters={} if torchrun == "yes" else {"epochs": 3},
    environment={"GREETING": "hello from the SDK"},
    stopping_condition=StoppingCondition(max_runtime_in_seconds=600),
    checkpoint_config=CheckpointConfig(s3_uri=f"s3://trainops/checkpoints/{base_name}/"),
    distributed=Torchrun(process_count_per_node=1) if torchrun == "yes" else None,
    # the two-host job's model uncompressed: each host's files merged under output/model/
    output_data_config=OutputDataConfig(
        s3_output_path=f"s3://trainops/{base_name}/", compression_type="NONE"
    ) if torchrun == "yes" else None,
    base_job_name=base_name,
)
error = None
try:
    trainer.train(input_data_config=channels, wait=True, logs=True)
except Exception as exc:  # the job failed: say why, as the SDK raised it
    error = str(exc)
job = trainer._latest_training_job
job.refresh()
result = {"name": job.training_job_name, "status": job.training_job_status, "error": error}
if job.training_job_status == "Completed":
    uri = job.model_artifacts.s3_model_artifacts
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    if uri.endswith("/"):  # uncompressed: the model's files under the prefix
        result["model"] = json.loads(
            s3.get_object(Bucket=bucket, Key=key + "model.json")["Body"].read()
        )
    else:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            result["model"] = json.load(tar.extractfile("model.json"))
    result["uri"] = uri
    listed = s3.list_objects_v2(Bucket="trainops", Prefix=f"checkpoints/{base_name}/")
    result["checkpoints"] = sorted(o["Key"] for o in listed.get("Contents", []))
print(json.dumps(result))
"""


# The SDK v3's HyperparameterTuner over a ModelTrainer: each trial runs the trainer's command
# (sm_train.sh), the tuned values reaching the script as the drivers read them.
TRAIN_TUNED = """
import argparse, json, math, os
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int)
parser.add_argument("--lr", type=float)
parser.add_argument("--optimizer")
args = parser.parse_args()
for epoch in range(1, args.epochs + 1):
    loss = abs(math.log10(args.lr) + 2) + (0.5 if args.optimizer == "sgd" else 0) + 1 / epoch
    print(f"epoch={epoch} val_loss={loss:.5f}", flush=True)
json.dump({"hps": json.loads(os.environ["SM_HPS"]), "lr": args.lr, "optimizer": args.optimizer},
          open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w"))
"""

TUNER_CLIENT = """
import io, json, sys, tarfile
import boto3
from sagemaker.core.parameter import CategoricalParameter, ContinuousParameter
from sagemaker.core.training.configs import Compute, SourceCode
from sagemaker.train import ModelTrainer
from sagemaker.train.tuner import HyperparameterTuner

trainer = ModelTrainer(
    training_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311",
    source_code=SourceCode(source_dir=sys.argv[1], entry_script="train.py"),
    role="arn:aws:iam::000000000000:role/SageMakerRole",
    compute=Compute(instance_type="ml.m5.large", instance_count=1),
    hyperparameters={"epochs": 2},
)
tuner = HyperparameterTuner(
    trainer,
    "val_loss",
    {"lr": ContinuousParameter(1e-4, 1e-1, scaling_type="Logarithmic"),
     "optimizer": CategoricalParameter(["sgd", "adam"])},
    metric_definitions=[{"Name": "val_loss", "Regex": "val_loss=([0-9.]+)"}],
    strategy="Random", objective_type="Minimize", max_jobs=3, max_parallel_jobs=2, random_seed=5,
)
tuner.tune(wait=True)
described = tuner.describe()
best = described.best_training_job
counters = described.training_job_status_counters
frame = tuner.analytics().dataframe()
job = boto3.client("sagemaker").describe_training_job(TrainingJobName=tuner.best_training_job())
bucket, key = job["ModelArtifacts"]["S3ModelArtifacts"].removeprefix("s3://").split("/", 1)
body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
    model = json.load(tar.extractfile("model.json"))
print(json.dumps({
    "status": described.hyper_parameter_tuning_job_status,
    "completed": counters.completed,
    "best": best.tuned_hyper_parameters,
    "objective": best.final_hyper_parameter_tuning_job_objective_metric.value,
    "rows": len(frame),
    "columns": sorted(frame.columns),
    "model": model,
}))
"""


@dataclass(frozen=True)
class Served:
    """A running `trainops server --s3` and what a client needs to reach it."""

    home: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require("weed")
    require_sdk3()
    home = tmp_path_factory.mktemp("sdk3") / "home"
    server = Server(
        home, TRAINOPS_S3_SERVE="1", TRAINOPS_LOCAL_CPUS="6"
    ).start()  # both jobs at once
    try:
        s3 = wait_for(lambda: read_client_file(home), timeout=120)
        wait_for(lambda: (home / "aws" / "sagemaker.yaml").is_file(), timeout=30)
        yield Served(home, _client_env(home, server.url, s3.endpoint_url, s3.region))
    finally:
        server.stop()


def _client_env(home: Path, url: str, s3_url: str, region: str) -> dict[str, str]:
    """The profile's key and every endpoint by its ``AWS_ENDPOINT_URL_<service>`` variable; no
    AWS config file (a missing one), so no endpoint comes from the profile."""
    aws = home / "aws"
    env = cli_env(
        home,
        AWS_SHARED_CREDENTIALS_FILE=str(aws / "credentials"),
        AWS_PROFILE="trainops",
        AWS_CONFIG_FILE=str(home / "no-aws-config"),
        AWS_DEFAULT_REGION=region,
        SAGEMAKER_USER_CONFIG_OVERRIDE=str(aws / "sagemaker.yaml"),
        AWS_ENDPOINT_URL_SAGEMAKER=url,
        AWS_ENDPOINT_URL_S3=s3_url,
        AWS_ENDPOINT_URL_CLOUDWATCH_LOGS=url,
        AWS_ENDPOINT_URL_CLOUDWATCH=url,
        AWS_ENDPOINT_URL_STS=url,
        AWS_ENDPOINT_URL_IAM=url,
    )
    env.pop("PYTHONPATH", None)  # the client sees its own venv only, not trainops
    return env


def _start(
    served: Served,
    folder: Path,
    script: str,
    *,
    base_name: str,
    hosts: int,
    torchrun: bool,
    local: Path | None = None,
    requirements: bool = False,
) -> subprocess.Popen[str]:
    """Start the client in the SDK v3's venv (``local``: a directory for a channel ``local``;
    ``requirements``: a requirements.txt naming a wheel in the source directory)."""
    source = folder / "src"
    source.mkdir(parents=True)
    (source / "train.py").write_text(script)
    if requirements:
        wheel = _wheel(source)
        (source / "requirements.txt").write_text(f"./{wheel.name}\n")
    client = folder / "client.py"
    client.write_text(CLIENT)
    args = [str(source), base_name, str(hosts), "yes" if torchrun else "no"]
    args += [] if local is None else [str(local)]
    return subprocess.Popen(
        [str(require_sdk3()), str(client), *args],
        env=served.env,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wheel(folder: Path) -> Path:
    """A one-module wheel, built here: the job installs it with no index reached."""
    path = folder / "tinyjobpkg-1.0-py3-none-any.whl"
    info = "tinyjobpkg-1.0.dist-info"
    files = {
        "tinyjobpkg/__init__.py": "VALUE = 42\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: tinyjobpkg\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            wheel.writestr(name, text)
    return path


def _result(process: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    """The client's result and its log (stderr), once it has ended."""
    try:
        stdout, stderr = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"the SDK client ran past 240 s: {stdout[-2000:]}{stderr[-2000:]}")
    assert process.returncode == 0, stdout[-3000:] + stderr[-3000:]
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    if not opt_ml_shown(True):  # the SDK's command needs /opt/ml: such a job fails saying so
        assert result["status"] == "Failed" and "/opt/ml" in str(result["error"]), result
        pytest.skip("this machine cannot show /opt/ml to a job: the job failed saying so")
    assert result["status"] == "Completed", str(result["error"]) + stderr[-6000:]
    return result, stderr


@pytest.fixture(scope="module")
def torchrun_client(
    served: Served, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[str] | None]:
    """The two-host Torchrun client, started as soon as the module's first test asks for it, so
    that its job runs beside the one-host job (each waits on the SDK's 5 s status polls, not on
    the cores); None where torch is not installed."""
    try:
        require_installed("torch")  # the job's Python (the server's) runs torchrun
    except pytest.skip.Exception:
        yield None
        return
    folder = tmp_path_factory.mktemp("v3-ddp")
    process = _start(served, folder, TRAIN_DDP, base_name="v3-ddp", hosts=2, torchrun=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_model_trainer_trains_with_the_endpoint_variables_and_reads_its_model(
    served: Served, tmp_path: Path, torchrun_client: subprocess.Popen[str] | None
) -> None:
    del torchrun_client  # asked for only to start it now: its job runs beside this one
    local = tmp_path / "notes"
    local.mkdir()
    (local / "note.txt").write_text("from a local directory")
    started = _start(
        served,
        tmp_path,
        TRAIN,
        base_name="v3-basic",
        hosts=1,
        torchrun=False,
        local=local,
        requirements=True,
    )
    result, log = _result(started)
    name = result["name"]
    value, installed = result["model"].pop("package")
    # SourceCode(requirements=): installed into the job's own environment (its drivers' pip
    # runs with the python3 first on PATH), never into the interpreter the server runs from
    assert value == 42 and "/env/lib/" in installed, installed
    assert not installed.startswith(sys.prefix)
    assert name.startswith("v3-basic-")
    assert result["uri"] == f"s3://trainops/v3-basic/{name}/output/model.tar.gz"
    assert result["model"] == {
        "total": 6,
        "epochs": 3,
        "hps": {"epochs": 3},
        "cwd": "/opt/ml/input/data/code",
        "model_dir": "/opt/ml/model",
        "local": {"note.txt": "from a local directory"},  # uploaded by the SDK, then downloaded
        "greeting": "hello from the SDK",  # environment=
    }
    # checkpoint_config=: the script's checkpoint, beside the manifest trainops keeps with it
    assert result["checkpoints"] == [
        "checkpoints/v3-basic/.trainops/manifest-algo-1.json",
        "checkpoints/v3-basic/step-3.txt",
    ]
    # logs=True: the job's lines, from its CloudWatch Logs stream, printed by the SDK
    assert f"{name}/algo-1-" in log
    assert "epoch=2 loss=0.1111" in log
    assert "Training Container Execution Completed" in log


def test_model_trainer_torchrun_runs_on_two_hosts(
    torchrun_client: subprocess.Popen[str] | None,
) -> None:
    if torchrun_client is None:
        require_installed("torch")  # skips, saying why
        return
    result, log = _result(torchrun_client)
    model = result["model"]  # rank 0's view: torchrun's, not the hosts' own SM_* variables
    assert {k: model[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK")} == {
        "RANK": "0",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "0",
        "GROUP_RANK": "0",
    }
    assert (model["MASTER_ADDR"], model["MASTER_PORT"]) == ("algo-1", "7777")  # the drivers'
    name = result["name"]
    # OutputDataConfig(compression_type="NONE"): rank 0's file merged under the model prefix
    assert result["uri"] == f"s3://trainops/v3-ddp/{name}/output/model/"
    for host, rank in (("algo-1", 0), ("algo-2", 1)):
        assert f"{name}/{host}-" in log  # both hosts' streams followed
        assert f"rank={rank} world=2 node={rank}" in log
    assert "torchrun --nnodes=2 --nproc_per_node=1" in log


def test_the_sdk_v3_tuner_runs_its_trials_and_reads_the_best_one_back(
    served: Served, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(TRAIN_TUNED)
    client = tmp_path / "tuner.py"
    client.write_text(TUNER_CLIENT)
    result, _ = run_client([str(require_sdk3()), str(client), str(source)], served.env, tmp_path)
    if not opt_ml_shown(True):  # the trials' command needs /opt/ml: they fail saying so
        assert result["status"] == "Failed", result
        pytest.skip("this machine cannot show /opt/ml to a job: the trials failed saying so")
    assert (result["status"], result["completed"], result["rows"]) == ("Completed", 3, 3)
    assert {"lr", "optimizer", "TrainingJobName", "FinalObjectiveValue"} <= set(result["columns"])
    best, model = result["best"], result["model"]
    # the best trial's own model: the values it was given, as its script read them
    assert model["optimizer"] == best["optimizer"] and best["optimizer"] in ("sgd", "adam")
    assert model["lr"] == float(best["lr"]) and 1e-4 <= model["lr"] <= 1e-1
    assert model["hps"]["epochs"] == 2 and model["hps"]["optimizer"] == best["optimizer"]
    assert result["objective"] == pytest.approx(
        abs(math.log10(model["lr"]) + 2) + (0.5 if model["optimizer"] == "sgd" else 0) + 0.5,
        abs=1e-4,
    )
