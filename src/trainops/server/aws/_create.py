"""CreateTrainingJob's request mapped to our job spec.

The training image: for now every job runs on the server's own Python, so an image is accepted
when it is one of SageMaker's framework training images (whose contract the script expects: the
``sagemaker_program`` entry point and the ``sagemaker_submit_directory`` tarball, read as the
training toolkit reads them); any other image, or an ``AlgorithmName``, fails at once, saying so.
The SageMaker Python SDK JSON-encodes every hyperparameter value (``"\\"text\\""``); a value that
is a JSON string is unwrapped, as the toolkit does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trainops.server.aws._errors import AwsError
from trainops.server.aws._schema import declared_spec
from trainops.server.aws._update import profiler_sections

__all__ = ["code_uri_of", "hyperparameters", "spec_of"]

PROGRAM, SUBMIT_DIRECTORY = "sagemaker_program", "sagemaker_submit_directory"
_FRAMEWORK_IMAGE = re.compile(
    r"[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/"
    r"(?:pytorch|tensorflow|mxnet|huggingface-pytorch|huggingface-tensorflow)-training"
    r"(?::[A-Za-z0-9._-]+)?|[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/"
    r"sagemaker-scikit-learn(?::[A-Za-z0-9._-]+)?"
)
_DISTRIBUTION = {"FullyReplicated": "FullyReplicated", "ShardedByS3Key": "ShardedByKey"}


def _invalid(message: str) -> AwsError:
    return AwsError(400, "ValidationException", message)


def hyperparameters(body: dict[str, Any]) -> dict[str, str]:
    """The request's hyperparameters, SDK-encoded strings unwrapped."""
    return {key: _unwrapped(value) for key, value in (body.get("HyperParameters") or {}).items()}


def _unwrapped(value: str) -> str:
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        if isinstance(decoded, str):
            return decoded
    return value


def code_uri_of(params: dict[str, str]) -> str:
    uri = params.get(SUBMIT_DIRECTORY)
    if not uri:
        raise _invalid(
            f"HyperParameters has no {SUBMIT_DIRECTORY}: trainops runs the script from the "
            "source tarball that hyperparameter names (the SDK's framework estimators set it; "
            "with boto3, upload sourcedir.tar.gz and set it and sagemaker_program)"
        )
    return uri


def spec_of(body: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
    """The job spec (as the REST API takes it) of a CreateTrainingJob request: the members
    ``_schema.MEMBERS`` derive, and those mapped here by hand (the entry point and the
    hyperparameters from the framework contract's hyperparameters, the channels)."""
    algorithm = body.get("AlgorithmSpecification") or {}
    _check_image(algorithm)
    program = params.get(PROGRAM)
    if not program:
        raise _invalid(
            f"HyperParameters has no {PROGRAM}: name the entry point script (the SDK's "
            "framework estimators set it from entry_point)"
        )
    mode = algorithm.get("TrainingInputMode", "File")
    by_hand: dict[str, Any] = {
        "entry_point": program,
        "hyperparameters": {k: v for k, v in params.items() if not k.startswith("sagemaker_")},
        "inputs": {c["ChannelName"]: _channel(c, mode) for c in body.get("InputDataConfig") or []},
    }
    return by_hand | declared_spec(body) | profiler_sections(body)


def _check_image(algorithm: dict[str, Any]) -> None:
    if algorithm.get("AlgorithmName"):
        raise _invalid(
            "AlgorithmSpecification.AlgorithmName is not supported: trainops runs framework "
            "training images' scripts; use a TrainingImage of a SageMaker framework (PyTorch, "
            "TensorFlow, scikit-learn, MXNet, Hugging Face)"
        )
    image = algorithm.get("TrainingImage")
    if image and _FRAMEWORK_IMAGE.fullmatch(image) is None:
        raise _invalid(
            f"TrainingImage {image[:200]!r} has no mapping on this trainops server: it runs "
            "SageMaker framework training images (PyTorch, TensorFlow, scikit-learn, MXNet, "
            "Hugging Face) on its own Python; use one of those images"
        )


def _channel(channel: dict[str, Any], mode: str) -> dict[str, Any]:
    source = (channel.get("DataSource") or {}).get("S3DataSource")
    if source is None:
        raise _invalid(
            f"InputDataConfig channel {channel['ChannelName']!r}: only DataSource.S3DataSource "
            "is supported"
        )
    found: dict[str, Any] = {
        "uri": source["S3Uri"],
        "mode": channel.get("InputMode") or mode,
        "distribution": _DISTRIBUTION.get(
            source.get("S3DataDistributionType", ""), "FullyReplicated"
        ),
        "s3_data_type": source["S3DataType"],
    }
    for ours, theirs in (("content_type", "ContentType"), ("compression", "CompressionType")):
        if channel.get(theirs):
            found[ours] = channel[theirs]
    return found
