"""CreateTrainingJob's request mapped to our spec: the framework contract's hyperparameters read
as the training toolkit reads them, the channels, and the image refusal."""

from __future__ import annotations

import copy
import json

import pytest

from tests.server.aws.test_conformance import SAMPLES
from trainops.agent import decode_hyperparameters, encode_hyperparameters
from trainops.server._settings import DEFAULT_IMAGES, ImageMapping
from trainops.server.aws import AwsError
from trainops.server.aws._create import code_uri_of, hyperparameters, spec_of
from trainops.server.aws._update import rule_configs
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
    assert spec["hyperparameters"] == {"epochs": 3, "name": "cnn", "quoted": '"not json'}
    assert spec["inputs"]["train"]["uri"] == "s3://bucket/train/"
    assert spec["inputs"]["train"]["mode"] == "File"
    assert spec["checkpoint"] == {"uri": "s3://bucket/ckpt/"}
    assert spec["retry_strategy"] == {"maximum_retry_attempts": 1}
    parsed = JobSpec(**spec)
    assert parsed.stopping_condition.max_runtime_in_seconds == 3600


@pytest.mark.parametrize(
    ("sent", "read"),
    [
        ("3", 3),
        ("0.001", 0.001),
        ('"adam"', "adam"),
        ('"32"', "32"),
        ("adam", "adam"),  # not JSON (boto3 sends text as it is): the text itself
        ("true", True),
        ("[64, 32]", [64, 32]),
        ('{"a": 1}', {"a": 1}),
        ("null", "null"),  # a job's hyperparameters carry no null, nor a non-finite number
        ("NaN", "NaN"),
        ("-Infinity", "-Infinity"),
        ("", ""),
        # hostile: JSON nested past what the decoder's recursion takes stays text, not a crash
        ("[" * 2500, "[" * 2500),
        ("[" * 40 + "]" * 40, "[" * 40 + "]" * 40),
        ('"' + "[" * 40 + '"', "[" * 40),  # brackets inside a string nest nothing
        ("[[[1]]]", [[[1]]]),
    ],
)
def test_each_value_is_what_the_toolkit_reads_and_written_back_as_sent(
    sent: str, read: object
) -> None:
    """SM_HPS has what the toolkit reads (``"3"`` is the number 3 there, as on SageMaker), and
    hyperparameters.json, written from the spec, has the SDK's JSON text again."""
    request = _request()
    request["HyperParameters"] = {"sagemaker_program": '"train.py"', "value": sent}
    spec = JobSpec(**spec_of(request, hyperparameters(request)))
    assert spec.hyperparameters == {"value": read}
    written = encode_hyperparameters(
        spec.hyperparameters, program="train.py", submit_directory="s3://b/c", job_name="j",
        region="us-east-1",
    )  # fmt: skip
    if isinstance(read, str) and read == sent:  # text: written back as a JSON string of it
        assert json.loads(written["value"]) == sent
    else:  # JSON as the SDK writes it
        assert json.loads(written["value"]) == json.loads(sent)
    assert decode_hyperparameters(written)["value"] == read


def test_an_image_without_a_mapping_fails_with_the_fix() -> None:
    request = _request()
    request["AlgorithmSpecification"] = {
        "TrainingImage": "mine:latest",
        "TrainingInputMode": "File",
    }
    with pytest.raises(AwsError) as caught:
        spec_of(request, hyperparameters(request))
    assert "has no mapping on this trainops server" in caught.value.message
    assert "images: ['mine:latest=server']" in caught.value.message


ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"


def _with_image(image: str) -> dict[str, object]:
    request = _request()
    request["AlgorithmSpecification"] = {"TrainingImage": image, "TrainingInputMode": "File"}
    return request


def _python(image: str, *entries: str) -> str | None:
    mappings = [ImageMapping.parse(e) for e in entries] if entries else DEFAULT_IMAGES
    request = _with_image(image)
    spec = spec_of(request, hyperparameters(request), mappings)
    JobSpec(**spec)
    python = spec.get("python")
    assert python is None or isinstance(python, str)
    return python


@pytest.mark.parametrize(
    "image",
    [
        f"{ECR}/pytorch-training:2.3.0-cpu-py311",
        f"{ECR}/tensorflow-training:2.16.1-gpu-py310-cu121-ubuntu20.04-sagemaker",
        "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3",
        f"{ECR}/huggingface-pytorch-training:2.1.0-transformers4.36.0-gpu-py310-cu121",
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:1.13.1-cpu-py39",
    ],
)
def test_by_default_every_framework_image_runs_on_the_server_s_python(image: str) -> None:
    assert _python(image) is None


def test_the_most_specific_mapping_wins() -> None:
    entries = (
        "pytorch=server",
        "pytorch:2=/opt/torch2/bin/python",
        "pytorch:2.3=/opt/torch23/bin/python",
        f"{ECR}/pytorch-training:2.3.0-cpu-py311=/opt/exact/bin/python",
    )
    assert _python(f"{ECR}/pytorch-training:2.3.0-cpu-py311", *entries) == "/opt/exact/bin/python"
    assert _python(f"{ECR}/pytorch-training:2.3.1-gpu-py311", *entries) == "/opt/torch23/bin/python"
    assert _python(f"{ECR}/pytorch-training:2.1.0-cpu-py310", *entries) == "/opt/torch2/bin/python"
    assert _python(f"{ECR}/pytorch-training:1.13.1-cpu-py39", *entries) is None
    # 2.3 is not a prefix of 2.30: versions match at their dots
    assert _python(f"{ECR}/pytorch-training:2.30.0-cpu-py311", *entries) == "/opt/torch2/bin/python"
    assert _python("registry.example/me/trainer:1", "registry.example/me/trainer:1=server") is None
    assert _python("mine:latest", "mine:latest=/opt/mine/bin/python") == "/opt/mine/bin/python"


@pytest.mark.parametrize(
    ("image", "suggested"),
    [
        (f"{ECR}/tensorflow-training:2.16.1-cpu-py310", "tensorflow:2.16.1=server"),
        ("registry.example/me/trainer:1", "registry.example/me/trainer:1=server"),
        # an ECR look-alike of a repository that is no framework's
        (
            f"{ECR}/pytorch-inference:2.3.0-cpu-py311",
            f"{ECR}/pytorch-inference:2.3.0-cpu-py311=server",
        ),
    ],
)
def test_an_image_no_entry_maps_fails_at_once_with_the_entry_to_add(
    image: str, suggested: str
) -> None:
    with pytest.raises(AwsError) as caught:
        _python(image, "pytorch=server")
    assert caught.value.code == "ValidationException"
    assert f"images: ['{suggested}']" in caught.value.message
    assert "TRAINOPS_IMAGES" in caught.value.message


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("pytorch", "is not IMAGE=PYTHON"),
        ("pytorch=", "is not IMAGE=PYTHON"),
        ("torch=server", "names no framework"),
        ("pytorch:latest=server", "use digits and dots"),
        ("pytorch=python3", "use server or an absolute interpreter path"),
        ("pytorch=/opt/py\x00thon", "use server or an absolute interpreter path"),
        ("a b/c=server", "characters an image name cannot have"),
    ],
)
def test_a_broken_images_entry_is_refused_with_its_problem(entry: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ImageMapping.parse(entry)


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
        ({"mp_parameters": "[" * 2500}, "mp_parameters is not a JSON object"),
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


@pytest.mark.parametrize(
    "image",
    [
        "../../../usr/bin/python",
        f"{ECR}/pytorch-training:$(touch /tmp/pwned)",
        f"{ECR}/pytorch-training:2.3.0\u202e-cpu",  # a right-to-left override
        "evil\x1b[2Jimage/x:1",
    ],
)
def test_a_hostile_image_name_is_refused_without_echoing_its_characters(image: str) -> None:
    with pytest.raises(AwsError) as caught:
        _python(image, "pytorch=server")
    message = caught.value.message
    assert "no images entry can name it" in message
    assert "\u202e" not in message and "\x1b" not in message and "images: [" not in message


def _model_trainer_request(**algorithm: object) -> dict[str, object]:
    """SAMPLES' request in the SDK v3 ModelTrainer's shape: no framework hyperparameters, a
    container command instead."""
    request = copy.deepcopy(SAMPLES["CreateTrainingJob"])
    request["HyperParameters"] = {"epochs": "3"}
    request["AlgorithmSpecification"] |= {  # type: ignore[operator]
        "ContainerEntrypoint": ["/bin/bash"],
        "ContainerArguments": ["-c", "/opt/ml/input/data/sm_drivers/sm_train.sh"],
        **algorithm,
    }
    return request


def test_a_container_command_needs_no_source_tarball() -> None:
    request = _model_trainer_request()
    params = hyperparameters(request)
    assert code_uri_of(params, request) == ""  # the code comes as a channel
    spec = JobSpec(**spec_of(request, params))
    assert spec.container_entrypoint == ["/bin/bash"]
    assert spec.container_args == ["-c", "/opt/ml/input/data/sm_drivers/sm_train.sh"]
    assert spec.entry_point == "bash"  # a label (the job's name base): the command runs
    assert spec.hyperparameters == {"epochs": 3}


@pytest.mark.parametrize(
    ("entrypoint", "label"),
    [(["/usr/bin/env", "python3"], "env"), (["/"], "command"), (["/x/<b>"], "command")],
)
def test_a_container_command_s_label_is_a_plain_name(entrypoint: list[str], label: str) -> None:
    request = _model_trainer_request(ContainerEntrypoint=entrypoint)
    assert spec_of(request, hyperparameters(request))["entry_point"] == label


def test_without_a_container_command_the_tarball_is_still_needed() -> None:
    request = copy.deepcopy(SAMPLES["CreateTrainingJob"])
    with pytest.raises(AwsError, match="or name the command to run in"):
        code_uri_of(hyperparameters(request), request)


def test_rule_parameters_are_read_as_json_and_hostile_ones_stay_text() -> None:
    """A profiler rule's parameters: a number, boolean or list where the text is one; JSON
    nested past the decoder's recursion is text, not a 500."""
    deep = "[" * 2500
    configs = rule_configs([{
        "RuleConfigurationName": "CPU",
        "RuleEvaluatorImage": "ignored",
        "RuleParameters": {"rule_to_invoke": "CPUBottleneck", "threshold": "50", "deep": deep},
    }])  # fmt: skip
    assert configs[0]["rule_parameters"] == {"threshold": 50, "deep": deep}
