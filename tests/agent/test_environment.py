"""The host tree, its config files and every SM_* variable, with the toolkit's encodings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainops.agent import (
    HostContext,
    HostTree,
    build_environment,
    encode_hyperparameters,
    input_data_config,
    resource_config,
    training_env,
)
from trainops.agent.contract._hyperparameters import decode_hyperparameters
from trainops.protocol import HostResources
from trainops.server.aws import training_job_arn
from trainops.spec import JobSpec

TOOLKIT_VARIABLES = {
    "SM_MODEL_DIR",
    "SM_CHANNELS",
    "SM_HPS",
    "SM_HOSTS",
    "SM_CURRENT_HOST",
    "SM_CURRENT_INSTANCE_TYPE",
    "SM_CURRENT_INSTANCE_GROUP",
    "SM_CURRENT_INSTANCE_GROUP_HOSTS",
    "SM_INSTANCE_GROUPS",
    "SM_INSTANCE_GROUPS_DICT",
    "SM_DISTRIBUTION_INSTANCE_GROUPS",
    "SM_IS_HETERO",
    "SM_NUM_CPUS",
    "SM_NUM_GPUS",
    "SM_NUM_NEURONS",
    "SM_LOG_LEVEL",
    "SM_NETWORK_INTERFACE_NAME",
    "SM_USER_ARGS",
    "SM_USER_ENTRY_POINT",
    "SM_MODULE_NAME",
    "SM_MODULE_DIR",
    "SM_FRAMEWORK_MODULE",
    "SM_FRAMEWORK_PARAMS",
    "SM_INPUT_DIR",
    "SM_INPUT_CONFIG_DIR",
    "SM_OUTPUT_DIR",
    "SM_OUTPUT_DATA_DIR",
    "SM_OUTPUT_INTERMEDIATE_DIR",
    "SM_RESOURCE_CONFIG",
    "SM_INPUT_DATA_CONFIG",
    "SM_TRAINING_ENV",
}
CHANNELS = (
    JobSpec(
        entry_point="train.py",
        inputs={
            "training": {"uri": "file:///data/train", "content_type": "text/csv"},
            "testing": {"uri": "file:///data/test", "distribution": "ShardedByKey"},
        },
    )
    .view()
    .inputs
)
CODE_URI = "file:///objects/code/sourcedir.tar.gz"


def _tree(tmp_path: Path, hosts: list[str], current: str = "algo-2") -> HostTree:
    tree = HostTree(tmp_path / "root", "/opt/ml/checkpoints/run")
    tree.create([c.name for c in CHANNELS])
    tree.write_config("resourceconfig.json", resource_config(current, hosts, "ml.c5.xlarge"))
    tree.write_config("inputdataconfig.json", input_data_config(CHANNELS))
    hps = encode_hyperparameters(
        {"batch-size": 256, "optimizer": "adam", "d": {"k": "v"}, "sagemaker_mpi_enabled": True},
        program="train.py",
        submit_directory=CODE_URI,
        job_name="job-1",
        region="us-east-1",
    )
    tree.write_config("hyperparameters.json", hps)
    return tree


def _host(cpus: list[int], gpus: list[int], hosts: list[str]) -> HostContext:
    return HostContext("job-1", "algo-2", hosts, HostResources(cpus=cpus, gpus=gpus), "train.py")


def _env(tree: HostTree, host: HostContext, **kwargs: object) -> dict[str, str]:
    hps = decode_hyperparameters(tree.read_config("hyperparameters.json"))
    options: dict[str, object] = {
        "spec_environment": {},
        "base_env": {"PATH": "/usr/bin", "TRAINOPS_AGENT_TOKEN": "secret", "HOME": "/home/u"},
        "machine_gpus": 0,
    }
    options.update(kwargs)
    return build_environment(tree, host, hps, **options)  # type: ignore[arg-type]


def test_tree_has_the_opt_ml_layout(tmp_path: Path) -> None:
    tree = _tree(tmp_path, ["algo-1", "algo-2"])
    root = tmp_path / "root"
    for rel in [
        "input/config",
        "input/data/training",
        "input/data/testing",
        "code",
        "model",
        "output/data",
        "output/intermediate",
        "checkpoints/run",
    ]:
        assert (root / rel).is_dir(), rel
    assert tree.checkpoint_dir == root / "checkpoints" / "run"
    assert tree.reroot("/opt/ml/x/y") == root / "x" / "y"


def test_resource_config_sorts_hosts_and_names_the_group(tmp_path: Path) -> None:
    tree = _tree(tmp_path, ["algo-2", "algo-1", "algo-3"])
    assert tree.read_config("resourceconfig.json") == {
        "current_host": "algo-2",
        "hosts": ["algo-1", "algo-2", "algo-3"],
        "network_interface_name": "lo",
        "current_instance_type": "ml.c5.xlarge",
        "current_group_name": "homogeneousCluster",
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": "ml.c5.xlarge",
                "hosts": ["algo-1", "algo-2", "algo-3"],
            }
        ],
    }


def test_input_data_config_has_one_file_mode_entry_per_channel(tmp_path: Path) -> None:
    tree = _tree(tmp_path, ["algo-2"])
    assert tree.read_config("inputdataconfig.json") == {
        "training": {
            "ContentType": "text/csv",
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        },
        "testing": {
            "TrainingInputMode": "File",
            "S3DistributionType": "ShardedByS3Key",
            "RecordWrapperType": "None",
        },
    }


def test_every_toolkit_variable_is_set_with_its_encoding(tmp_path: Path) -> None:
    hosts = ["algo-1", "algo-2"]
    tree = _tree(tmp_path, hosts)
    env = _env(tree, _host([0, 1], [], hosts))
    root = tmp_path / "root"
    assert set(env) >= TOOLKIT_VARIABLES
    assert env["SM_CHANNELS"] == '["testing","training"]'
    assert env["SM_CHANNEL_TRAINING"] == str(root / "input/data/training")
    assert env["SM_CHANNEL_TESTING"] == str(root / "input/data/testing")
    assert json.loads(env["SM_HPS"]) == {"batch-size": 256, "optimizer": "adam", "d": {"k": "v"}}
    assert env["SM_HP_BATCH-SIZE"] == "256"
    assert env["SM_HP_OPTIMIZER"] == "adam"
    assert env["SM_HP_D"] == '{"k":"v"}'
    assert "SM_HP_SAGEMAKER_MPI_ENABLED" not in env
    assert json.loads(env["SM_FRAMEWORK_PARAMS"]) == {"sagemaker_mpi_enabled": True}
    assert env["SM_HOSTS"] == '["algo-1","algo-2"]'
    assert env["SM_CURRENT_HOST"] == "algo-2"
    assert env["SM_CURRENT_INSTANCE_TYPE"] == "ml.c5.xlarge"
    assert env["SM_CURRENT_INSTANCE_GROUP"] == "homogeneousCluster"
    assert env["SM_CURRENT_INSTANCE_GROUP_HOSTS"] == '["algo-1","algo-2"]'
    assert env["SM_INSTANCE_GROUPS"] == '["homogeneousCluster"]'
    assert env["SM_DISTRIBUTION_INSTANCE_GROUPS"] == '["homogeneousCluster"]'
    assert env["SM_IS_HETERO"] == "false"
    assert env["SM_NUM_CPUS"] == "2"
    assert env["SM_NUM_GPUS"] == "0"
    assert env["SM_NUM_NEURONS"] == "0"
    assert env["SM_LOG_LEVEL"] == "20"
    assert env["SM_NETWORK_INTERFACE_NAME"] == "lo"
    assert json.loads(env["SM_USER_ARGS"]) == [
        "--batch-size", "256", "-d", "k=v", "--optimizer", "adam",
    ]  # fmt: skip
    assert env["SM_USER_ENTRY_POINT"] == "train.py"
    assert env["SM_MODULE_NAME"] == "train"
    assert env["SM_MODULE_DIR"] == CODE_URI
    assert env["SM_FRAMEWORK_MODULE"] == ""
    assert env["SM_MODEL_DIR"] == str(root / "model")
    assert env["SM_INPUT_DIR"] == str(root / "input")
    assert env["SM_INPUT_CONFIG_DIR"] == str(root / "input/config")
    assert env["SM_OUTPUT_DIR"] == str(root / "output")
    assert env["SM_OUTPUT_DATA_DIR"] == str(root / "output/data")
    assert env["SM_OUTPUT_INTERMEDIATE_DIR"] == str(root / "output/intermediate")
    assert json.loads(env["SM_RESOURCE_CONFIG"]) == tree.read_config("resourceconfig.json")
    assert json.loads(env["SM_INPUT_DATA_CONFIG"]) == tree.read_config("inputdataconfig.json")


def test_training_env_is_the_toolkit_environment(tmp_path: Path) -> None:
    hosts = ["algo-1", "algo-2"]
    tree = _tree(tmp_path, hosts)
    host = _host([0], [], hosts)
    env = _env(tree, host)
    hps = decode_hyperparameters(tree.read_config("hyperparameters.json"))
    expected = training_env(tree, host, hps)
    assert json.loads(env["SM_TRAINING_ENV"]) == json.loads(json.dumps(expected))
    assert expected["job_name"] == "job-1"
    assert expected["is_master"] is False
    assert expected["master_hostname"] == "algo-1"
    assert expected["distribution_hosts"] == hosts
    assert expected["num_cpus"] == 1
    assert expected["channel_input_dirs"]["training"] == str(tree.channel_dir("training"))


def test_platform_and_trainops_variables(tmp_path: Path) -> None:
    tree = _tree(tmp_path, ["algo-2"])
    env = _env(tree, _host([0, 1, 2], [], ["algo-2"]), spec_environment={"MKL_NUM_THREADS": "1"})
    assert env["TRAINING_JOB_NAME"] == "job-1"
    # The ARN the API answers with (the server's region; the one account; the name lower-cased).
    assert env["TRAINING_JOB_ARN"] == "arn:aws:sagemaker:us-east-1:000000000000:training-job/job-1"
    assert env["SAGEMAKER_BASE_DIR"] == str(tmp_path / "root")
    assert env["AWS_REGION"] == "us-east-1"  # from sagemaker_region, as the toolkit sets it
    assert env["SM_CHECKPOINT_DIR"] == str(tmp_path / "root/checkpoints/run")
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "3"
    assert env["NUMEXPR_NUM_THREADS"] == "3"
    assert env["MKL_NUM_THREADS"] == "1"  # the spec's environment wins
    assert env["HOME"] == "/home/u"
    assert env["PYTHONPATH"].split(":")[0] == str(tree.code_dir)
    assert not any(name.startswith("TRAINOPS_AGENT_") for name in env)


@pytest.mark.parametrize(
    ("gpus", "machine_gpus", "expected"),
    [([1, 3], 4, "1,3"), ([], 2, ""), ([], 0, None)],
)
def test_cuda_visible_devices_follows_the_reservation(
    tmp_path: Path, gpus: list[int], machine_gpus: int, expected: str | None
) -> None:
    tree = _tree(tmp_path, ["algo-2"])
    env = _env(tree, _host([], gpus, ["algo-2"]), machine_gpus=machine_gpus)
    assert env.get("CUDA_VISIBLE_DEVICES") == expected
    assert env["SM_NUM_GPUS"] == str(len(gpus))


def test_counts_without_ids_leave_the_engines_gpus_and_set_the_counts(tmp_path: Path) -> None:
    # A backend whose engine hands out the devices (Ray) says how many, not which.
    tree = _tree(tmp_path, ["algo-2"])
    resources = HostResources(gpu_count=2, cpu_count=8)
    host = HostContext("job-1", "algo-2", ["algo-2"], resources, "train.py")
    env = _env(tree, host, machine_gpus=4)
    assert "CUDA_VISIBLE_DEVICES" not in env  # the one the agent inherited stands
    assert env["SM_NUM_GPUS"] == "2" and env["OMP_NUM_THREADS"] == "8"


def test_without_a_cpu_reservation_the_machine_counts(tmp_path: Path) -> None:
    tree = _tree(tmp_path, ["algo-2"])
    env = _env(tree, _host([], [], ["algo-2"]))
    assert env["SM_NUM_CPUS"] == str(os.cpu_count())
    assert "OMP_NUM_THREADS" not in env


def test_the_server_s_variables_never_reach_the_script(tmp_path: Path) -> None:
    tree = _tree(tmp_path, ["algo-1", "algo-2"])
    server = {
        "TRAINOPS_HOME": "/home/u/.trainops",
        "TRAINOPS_TOKEN": "api-token",
        "TRAINOPS_SERVER": "http://127.0.0.1:8080",
        "TRAINOPS_ALLOWED_HOSTS": "example.org",
        "TRAINOPS_LOCAL_CPUS": "8",
        "TRAINOPS_RAY_ADDRESS": "ray://head:10001",
    }
    in_job = {"TRAINOPS_PROFILER_DIR": "/opt/ml/output/profiler", "TRAINOPS_DATA_SHM": "1"}
    env = _env(tree, _host([0], [], ["algo-1", "algo-2"]), base_env={**server, **in_job})
    assert not set(server) & set(env)
    assert "api-token" not in json.dumps(env)
    assert {k: env[k] for k in in_job} == in_job


def test_the_job_arn_names_the_server_s_region_as_the_api_answers_with_it(tmp_path: Path) -> None:
    # The script's TRAINING_JOB_ARN is the TrainingJobArn that DescribeTrainingJob gives.
    tree = _tree(tmp_path, ["algo-2"])
    host = HostContext(
        "Digits-Run-7", "algo-2", ["algo-2"], HostResources(), "train.py", region="eu-west-1"
    )
    env = _env(tree, host)
    want = "arn:aws:sagemaker:eu-west-1:000000000000:training-job/digits-run-7"
    assert env["TRAINING_JOB_ARN"] == want
    assert env["TRAINING_JOB_ARN"] == training_job_arn("eu-west-1", "Digits-Run-7")
