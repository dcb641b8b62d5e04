"""CreateTrainingJob's request mapped to our job spec.

The training image: the server's ``images`` setting maps it to a local Python (``_images.py``;
by default every SageMaker framework training image runs on the server's own Python), whose
contract the script expects: the ``sagemaker_program`` entry point and the
``sagemaker_submit_directory`` tarball, read as the training toolkit reads them, and the
``distribution=`` flags the SDK sets. An image with no mapping, or an ``AlgorithmName``, fails
at once, saying so. The SageMaker Python SDK JSON-encodes every hyperparameter value
(``"\\"text\\""``, ``3``); the job's hyperparameters are what the training toolkit reads from
them (``text``, the number 3; a value that is not JSON, as itself).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from trainops.protocol import LAUNCHER_FLAGS, sdk_unwrapped, toolkit_value
from trainops.server._schema import declared_spec
from trainops.server._settings import DEFAULT_IMAGES, ImageMapping
from trainops.server.aws._errors import AwsError
from trainops.server.aws._images import python_for
from trainops.server.aws._update import profiler_sections

__all__ = ["code_uri_of", "hyperparameters", "spec_of"]

PROGRAM, SUBMIT_DIRECTORY = "sagemaker_program", "sagemaker_submit_directory"
MODEL_PARALLEL = "mp_parameters"  # the SDK's smdistributed.modelparallel parameters
_MPI_PROCESSES = "sagemaker_mpi_num_of_processes_per_host"
_MPI_OPTIONS = "sagemaker_mpi_custom_mpi_options"
_DATA_PARALLEL = "sagemaker_distributed_dataparallel_enabled"
_DATA_PARALLEL_OPTIONS = "sagemaker_distributed_dataparallel_custom_mpi_options"
_XLA = "sagemaker_pytorch_xla_multi_worker_enabled"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_DISTRIBUTION = {"FullyReplicated": "FullyReplicated", "ShardedByS3Key": "ShardedByKey"}


def _invalid(message: str) -> AwsError:
    return AwsError(400, "ValidationException", message)


def hyperparameters(body: dict[str, Any]) -> dict[str, str]:
    """The request's hyperparameters, SDK-encoded strings unwrapped."""
    return {key: sdk_unwrapped(value) for key, value in (body.get("HyperParameters") or {}).items()}


def code_uri_of(params: dict[str, str], body: dict[str, Any] | None = None) -> str:
    """The source tarball's URI; ``""`` (no tarball) for a request that names its own
    ContainerEntrypoint without one (the SDK v3's ModelTrainer: its code is a channel)."""
    uri = params.get(SUBMIT_DIRECTORY)
    if not uri and _container_entrypoint(body or {}):
        return ""
    if not uri:
        raise _invalid(
            f"HyperParameters has no {SUBMIT_DIRECTORY}: trainops runs the script from the "
            "source tarball that hyperparameter names (the SDK's framework estimators set it; "
            "with boto3, upload sourcedir.tar.gz and set it and sagemaker_program; or name the "
            "command to run in AlgorithmSpecification.ContainerEntrypoint)"
        )
    return uri


def spec_of(
    body: dict[str, Any],
    params: dict[str, str],
    images: Sequence[ImageMapping] = DEFAULT_IMAGES,
) -> dict[str, Any]:
    """The job spec (as the REST API takes it) of a CreateTrainingJob request: the members
    ``_schema.MEMBERS`` derive, and those mapped here by hand (the entry point and the
    hyperparameters from the framework contract's hyperparameters, the distribution its flags
    set, the channels, the Python that ``images``, the server's setting, maps TrainingImage to)."""
    algorithm = body.get("AlgorithmSpecification") or {}
    python = _python_of(algorithm, images)
    program = params.get(PROGRAM) or _command_name(_container_entrypoint(body))
    if not program:
        raise _invalid(
            f"HyperParameters has no {PROGRAM}: name the entry point script (the SDK's "
            "framework estimators set it from entry_point)"
        )
    mode = algorithm.get("TrainingInputMode", "File")
    by_hand: dict[str, Any] = {
        "entry_point": program,
        # as the training toolkit reads them ("3" is 3 in SM_HPS), so that the host writes
        # them back to hyperparameters.json as the SDK sent them
        "hyperparameters": {
            k: toolkit_value(v)
            for k, v in (body.get("HyperParameters") or {}).items()
            if not k.startswith("sagemaker_") and k != MODEL_PARALLEL
        },
        "inputs": {c["ChannelName"]: _channel(c, mode) for c in body.get("InputDataConfig") or []},
    }
    distribution = distribution_of(params)
    if distribution:
        by_hand["distribution"] = distribution
    if python is not None:
        by_hand["python"] = python
    return by_hand | declared_spec(body) | profiler_sections(body)


def _container_entrypoint(body: dict[str, Any]) -> list[str]:
    return list((body.get("AlgorithmSpecification") or {}).get("ContainerEntrypoint") or [])


def _command_name(entrypoint: list[str]) -> str | None:
    """The spec's entry point (the job's name base and label) for a ContainerEntrypoint: its
    program's file name (``/bin/bash``: ``bash``); the command runs, not this name."""
    if not entrypoint:
        return None
    name = PurePosixPath(entrypoint[0]).name
    return name if _PLAIN_NAME.fullmatch(name) and name not in {".", ".."} else "command"


def _enabled(value: str | None) -> bool:
    return (value or "").strip().lower() in {"true", "1"}


def distribution_of(params: dict[str, str]) -> dict[str, Any]:
    """The spec's ``distribution`` from the flags the SDK's ``distribution=`` argument sets
    (the inverse of what the agent writes to hyperparameters.json for the toolkit)."""
    if _enabled(params.get(_XLA)):
        raise _invalid("distribution pytorchxla is not supported by trainops (no XLA devices)")
    found: dict[str, Any] = {
        name: {"enabled": True}
        for name, flag in LAUNCHER_FLAGS.items()
        if _enabled(params.get(flag))
    }
    if "mpi" in found:
        found["mpi"] |= {"custom_mpi_options": params.get(_MPI_OPTIONS) or ""}
        if params.get(_MPI_PROCESSES):
            found["processes_per_host"] = _whole(_MPI_PROCESSES, params[_MPI_PROCESSES])
    smdistributed: dict[str, Any] = {}
    if _enabled(params.get(_DATA_PARALLEL)):
        options = params.get(_DATA_PARALLEL_OPTIONS) or ""
        smdistributed["dataparallel"] = {"enabled": True, "custom_mpi_options": options}
    if params.get(MODEL_PARALLEL):
        smdistributed["modelparallel"] = {
            "enabled": True,
            "parameters": _json_object(MODEL_PARALLEL, params[MODEL_PARALLEL]),
        }
    if smdistributed:
        found["smdistributed"] = smdistributed
    return found


def _whole(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _invalid(f"HyperParameters.{name} {value[:40]!r} is not a whole number") from None


def _json_object(name: str, value: str) -> dict[str, Any]:
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        decoded = None
    if not isinstance(decoded, dict):
        raise _invalid(f"HyperParameters.{name} is not a JSON object")
    return decoded


def _file_system_channel(
    source: dict[str, Any], channel: dict[str, Any], mode: str
) -> dict[str, Any]:
    """A FileSystemDataSource (the model has made each of its members required): the spec's
    file-system channel, its directory shown as it is (the hosts must see it at that path; the
    service's VPC does not exist here)."""
    found: dict[str, Any] = {
        "mode": channel.get("InputMode") or mode,
        "file_system": {
            "directory_path": source["DirectoryPath"],
            "access_mode": source["FileSystemAccessMode"],
            "type": source["FileSystemType"],
            "id": source["FileSystemId"],
        },
    }
    if channel.get("ContentType"):
        found["content_type"] = channel["ContentType"]
    return found


def _python_of(algorithm: dict[str, Any], images: Sequence[ImageMapping]) -> str | None:
    if algorithm.get("AlgorithmName"):
        raise _invalid(
            "AlgorithmSpecification.AlgorithmName is not supported: trainops runs framework "
            "training images' scripts; use a TrainingImage of a SageMaker framework (PyTorch, "
            "TensorFlow, scikit-learn, MXNet, Hugging Face, XGBoost) or one the server maps"
        )
    image = algorithm.get("TrainingImage")
    return None if not image else python_for(image, images)


def _channel(channel: dict[str, Any], mode: str) -> dict[str, Any]:
    data_source = channel.get("DataSource") or {}
    if "FileSystemDataSource" in data_source:
        return _file_system_channel(data_source["FileSystemDataSource"], channel, mode)
    source = data_source.get("S3DataSource")
    if source is None:
        raise _invalid(
            f"InputDataConfig channel {channel['ChannelName']!r}: only DataSource.S3DataSource "
            "and DataSource.FileSystemDataSource are supported"
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
