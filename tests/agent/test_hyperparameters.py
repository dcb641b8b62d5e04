"""Hyperparameter encoding, decoding, splitting and the toolkit's argument and env rules."""

from __future__ import annotations

import json

import pytest

from trainops.agent import (
    decode_hyperparameters,
    encode_hyperparameters,
    split_hyperparameters,
    to_cmd_args,
    to_env_vars,
)


def _encoded() -> dict[str, str]:
    return encode_hyperparameters(
        {"optimizer": "adam", "lr": 0.01, "epochs": 3, "flag": True, "layers": [1, 2]},
        program="train.py",
        submit_directory="file:///code/sourcedir.tar.gz",
        job_name="job-1",
        region="eu-west-1",
    )


def test_every_value_is_json_encoded_like_the_sdk() -> None:
    encoded = _encoded()
    assert encoded["optimizer"] == '"adam"'
    assert encoded["lr"] == "0.01"
    assert encoded["flag"] == "true"
    assert encoded["layers"] == "[1, 2]"
    assert encoded["sagemaker_program"] == '"train.py"'
    assert encoded["sagemaker_submit_directory"] == '"file:///code/sourcedir.tar.gz"'
    assert encoded["sagemaker_container_log_level"] == "20"
    assert encoded["sagemaker_job_name"] == '"job-1"'
    assert encoded["sagemaker_region"] == '"eu-west-1"'


def test_decoding_round_trips_and_keeps_raw_strings() -> None:
    decoded = decode_hyperparameters(_encoded())
    assert decoded["optimizer"] == "adam"
    assert decoded["epochs"] == 3
    assert decoded["flag"] is True
    assert decoded["layers"] == [1, 2]
    assert decode_hyperparameters({"raw": "not json"}) == {"raw": "not json"}
    # hostile: a container command's hyperparameters.json holds the request's text as sent, and
    # JSON nested past the decoder's recursion is kept as text, not a crash of the agent
    assert decode_hyperparameters({"deep": "[" * 2500}) == {"deep": "[" * 2500}


def test_split_separates_user_framework_and_sagemaker_entries() -> None:
    values = decode_hyperparameters(_encoded()) | {"sagemaker_mpi_enabled": True}
    user, framework, sagemaker = split_hyperparameters(values)
    assert set(user) == {"optimizer", "lr", "epochs", "flag", "layers"}
    assert framework == {"sagemaker_mpi_enabled": True}
    assert "sagemaker_program" in sagemaker and "sagemaker_mpi_enabled" in sagemaker


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"lr": 0.001, "batch-size": 256}, ["--batch-size", "256", "--lr", "0.001"]),
        ({"a": 1, "bb": 2}, ["-a", "1", "--bb", "2"]),
        ({"flag": True, "off": False}, ["--flag", "True", "--off", "False"]),
        ({"d": {"z": 1, "a": "x"}}, ["-d", "a=x,z=1"]),
        ({"l": [1, 2]}, ["-l", "[1, 2]"]),
        ({"s": "text with space"}, ["-s", "text with space"]),
        ({"n": None}, ["-n", ""]),
        ({}, []),
    ],
)
def test_to_cmd_args_follows_the_toolkit(mapping: dict[str, object], expected: list[str]) -> None:
    assert to_cmd_args(mapping) == expected


def test_to_env_vars_follows_the_toolkit() -> None:
    env = to_env_vars(
        {"hp_batch-size": 256, "hp_name": "adam", "hp_none": None, "hp_d": {"b": 1, "a": [1, 2]}}
    )
    assert env == {
        "SM_HP_BATCH-SIZE": "256",
        "SM_HP_NAME": "adam",
        "SM_HP_NONE": "",
        "SM_HP_D": json.dumps({"a": [1, 2], "b": 1}, separators=(",", ":")),
    }
