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
