"""CreateTrainingJob's request mapped to our spec: the framework contract's hyperparameters read
as the training toolkit reads them, the channels, and the image refusal."""

from __future__ import annotations

import copy

import pytest

from tests.server.aws.test_conformance import SAMPLES
from trainops.server.aws import AwsError
from trainops.server.aws._create import code_uri_of, hyperparameters, spec_of
from trainops.spec import JobSpec


def _request() -> dict[str, object]:
    request = copy.deepcopy(SAMPLES["CreateTrainingJob"])
    request["HyperParameters"] |= {  # type: ignore[operator]
        "sagemaker_submit_directory": '"s3://bucket/code/sourcedir.tar.gz"',
        "sagemaker_container_log_level": "20",
        "name": '"cnn"',
        "quoted": '"not json',
    }
    return request


def test_the_sdk_s_hyperparameters_are_read_as_the_toolkit_reads_them() -> None:
    request = _request()
    params = hyperparameters(request)
    assert code_uri_of(params) == "s3://bucket/code/sourcedir.tar.gz"
    spec = spec_of(request, params)
    assert spec["entry_point"] == "train.py"
    assert spec["hyperparameters"] == {"epochs": "3", "name": "cnn", "quoted": '"not json'}
    assert spec["inputs"]["train"]["uri"] == "s3://bucket/train/"
    assert spec["inputs"]["train"]["mode"] == "File"
    assert spec["checkpoint"] == {"uri": "s3://bucket/ckpt/"}
    assert spec["retry_strategy"] == {"maximum_retry_attempts": 1}
    parsed = JobSpec(**spec)
    assert parsed.stopping_condition.max_runtime_in_seconds == 3600


def test_an_image_without_a_mapping_fails_with_the_fix() -> None:
    request = _request()
    request["AlgorithmSpecification"] = {
        "TrainingImage": "mine:latest",
        "TrainingInputMode": "File",
    }
    with pytest.raises(AwsError) as caught:
        spec_of(request, hyperparameters(request))
    assert "has no mapping on this trainops server" in caught.value.message
    assert "use one of those images" in caught.value.message


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"sagemaker_torch_distributed_enabled": "true"}, {"torch_distributed": {"enabled": True}}),
        ({"sagemaker_pytorch_ddp_enabled": "true"}, {"pytorchddp": {"enabled": True}}),
        (
            {
                "sagemaker_mpi_enabled": "true",
                "sagemaker_mpi_num_of_processes_per_host": "2",
                "sagemaker_mpi_custom_mpi_options": '"-x NCCL_DEBUG=INFO"',
            },
            {
                "mpi": {"enabled": True, "custom_mpi_options": "-x NCCL_DEBUG=INFO"},
                "processes_per_host": 2,
            },
        ),
        (
            {"sagemaker_distributed_dataparallel_enabled": "true"},
            {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": ""}}},
        ),
        (
            {
                "sagemaker_mpi_enabled": "true",
                "sagemaker_mpi_num_of_processes_per_host": "2",
                "mp_parameters": '{"partitions": 2}',
            },
            {
                "mpi": {"enabled": True, "custom_mpi_options": ""},
                "processes_per_host": 2,
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"partitions": 2}}
                },
            },
        ),
        ({"sagemaker_torch_distributed_enabled": "false"}, None),
    ],
)
def test_the_sdk_s_distribution_flags_become_the_spec_s_distribution(
    flags: dict[str, str], expected: dict[str, object] | None
) -> None:
    request = _request()
    request["HyperParameters"] |= flags  # type: ignore[operator]
    spec = spec_of(request, hyperparameters(request))
    assert spec.get("distribution") == expected
    assert "mp_parameters" not in spec["hyperparameters"]
    JobSpec(**spec)  # the spec takes it


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ({"sagemaker_pytorch_xla_multi_worker_enabled": "true"}, "pytorchxla is not supported"),
        (
            {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "many"},
            "sagemaker_mpi_num_of_processes_per_host 'many' is not a whole number",
        ),
        ({"mp_parameters": "[1, 2]"}, "mp_parameters is not a JSON object"),
        ({"mp_parameters": "{not json"}, "mp_parameters is not a JSON object"),
    ],
)
def test_a_broken_distribution_flag_is_refused_in_one_line(
    flags: dict[str, str], words: str
) -> None:
    request = _request()
    request["HyperParameters"] |= flags  # type: ignore[operator]
    with pytest.raises(AwsError) as caught:
        spec_of(request, hyperparameters(request))
    assert caught.value.code == "ValidationException"
    assert words in caught.value.message
