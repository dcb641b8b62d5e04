"""What a SageMaker Python SDK argument becomes here, for users porting an estimator.

An unknown spec field that is an argument of the SDK's ``EstimatorBase``, ``Framework``,
``Estimator`` or ``PyTorch`` classes (or of ``TrainingInput`` inside a channel) gets a message
naming the trainops field to use instead, or saying plainly that it has no meaning here. A few
habits are kept instead (:func:`sagemaker_habits`): ``max_run``, ``max_wait``,
``checkpoint_s3_uri`` and ``checkpoint_local_path`` set their fields (``input_mode``, the
channels' default mode, is applied by the job spec), and ``role``, ``framework_version``,
``py_version``, ``image_uri`` and ``tags``, which have no effect here, are accepted with a note.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = [
    "CHANNEL_ARGUMENTS",
    "ESTIMATOR_ARGUMENTS",
    "FILE_SYSTEM_ARGUMENTS",
    "MAPPED_ARGUMENTS",
    "NO_LOCAL_EFFECT",
    "HabitError",
    "sagemaker_habits",
    "sagemaker_hint",
]

_NO_CONTAINER = (
    "trainops runs no containers: the script runs with this machine's Python; list extra "
    "packages in source_dir/requirements.txt"
)
_NO_AWS = "has no meaning in trainops (no AWS account is involved); remove it"
_LOCAL_DISK = "has no meaning in trainops: hosts use the local disk under $TRAINOPS_HOME; remove it"
_NOT_YET = "is not supported by trainops; remove it"

ESTIMATOR_ARGUMENTS: dict[str, str] = {
    # Renamed: the trainops field carries the same meaning.
    "enable_managed_spot_training": "use use_spot_instances",
    "max_retry_attempts": "use retry_strategy.maximum_retry_attempts",
    "checkpoint_uri": "use checkpoint.uri",
    "output_dir": "use output_path",
    "output_uri": "use output_path",
    "output_s3_uri": "use output_path",
    "s3_output_path": "use output_path",
    "model_dir": (
        "has no meaning in trainops: the script writes to SM_MODEL_DIR and trainops uploads it "
        "as model.tar.gz under output_path"
    ),
    "model_uri": "use an input channel, e.g. inputs: {model: <uri>}",
    "model_channel_name": "use an input channel, e.g. inputs: {model: <uri>}",
    "instance_groups": "use instance_type and instance_count (one group of identical hosts)",
    "container_entry_point": "use container_entrypoint (an argv list), or entry_point",
    "container_arguments": "use container_args (with container_entrypoint), or hyperparameters",
    "dependencies": "copy them into source_dir (or list packages in requirements.txt)",
    "git_config": "check the repository out locally and point source_dir at it",
    "code_location": (
        "has no meaning in trainops: the source tarball is stored with the job's artifacts"
    ),
    "env": "use environment",
    "metrics": "use metric_definitions",
    "wait": "is an argument of fit(), not a job field",
    "logs": "is an argument of fit(), not a job field",
    "sagemaker_session": (
        "has no meaning in trainops: set TRAINOPS_SERVER (or TRAINOPS_HOME) to choose where jobs "
        "run"
    ),
    # No meaning: AWS-only or container-only settings.
    "image_name": _NO_CONTAINER,
    "train_image": _NO_CONTAINER,
    "pytorch_version": _NO_CONTAINER,
    "tensorflow_version": _NO_CONTAINER,
    "transformers_version": _NO_CONTAINER,
    "script_mode": "has no meaning in trainops: scripts always run in script mode",
    "volume_size": _LOCAL_DISK,
    "volume_kms_key": _NO_AWS,
    "output_kms_key": _NO_AWS,
    "subnets": _NO_AWS,
    "security_group_ids": _NO_AWS,
    "encrypt_inter_container_traffic": _NO_AWS,
    "enable_network_isolation": _NOT_YET,
    "keep_alive_period_in_seconds": (
        "has no meaning in trainops: the local backend keeps a warm spare agent by itself"
    ),
    "disable_profiler": "use profiler_config.disable_profiler",
    "enable_sagemaker_metrics": (
        "has no meaning in trainops: metrics from metric_definitions are always recorded"
    ),
    "container_log_level": (
        "has no meaning in trainops: the script's output is recorded as it is written"
    ),
    "compiler_config": _NOT_YET,
    "training_recipe": _NOT_YET,
    "recipe_overrides": _NOT_YET,
    "training_repository_access_mode": _NO_CONTAINER,
    "training_repository_credentials_provider_arn": _NO_CONTAINER,
    "enable_infra_check": _NOT_YET,
    "enable_remote_debug": _NOT_YET,
    "enable_session_tag_chaining": _NO_AWS,
    "training_plan": _NO_AWS,
    "instance_placement_config": _NO_AWS,
    "experiment_config": _NOT_YET,
}

CHANNEL_ARGUMENTS: dict[str, str] = {
    "s3_data": "use uri",
    "input_mode": "use mode (File, Pipe or FastFile)",
    "s3_data_distribution_type": "use distribution (FullyReplicated or ShardedByKey)",
    "shuffle_config": "use shuffle_seed (a whole number)",
    "compression_type": "use compression (None or Gzip)",
    "record_wrapper_type": "use record_wrapping (None or RecordIO)",
    "target_attribute_name": _NOT_YET,
    "instance_groups": _NOT_YET,
    "hub_access_config": _NO_AWS,
    "model_access_config": _NO_AWS,
    "file_system_id": "use file_system: {id: ..., directory_path: ...}",
    "file_system_type": "use file_system: {type: ..., directory_path: ...}",
    "directory_path": "use file_system: {directory_path: ...}",
    "file_system_access_mode": "use file_system: {access_mode: ro|rw, directory_path: ...}",
}

# FileSystemInput's arguments inside a channel's file_system block.
FILE_SYSTEM_ARGUMENTS: dict[str, str] = {
    "file_system_id": "use id",
    "file_system_type": "use type (EFS, FSxLustre, NFS or Local)",
    "file_system_access_mode": "use access_mode (ro or rw)",
    "content_type": "put content_type on the channel, beside file_system",
}


def sagemaker_hint(table: dict[str, str], name: str) -> str | None:
    """What to do about SDK argument ``name`` found in ``table`` (``None`` if it is not one)."""
    hint = table.get(name)
    if hint is None:
        return None
    return f"unknown field (a SageMaker SDK argument): {hint}"


class HabitError(ValueError):
    """An SDK argument that cannot be taken: ``field`` and why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


#: SDK arguments with no effect here: accepted and dropped, each with a one-line note.
NO_LOCAL_EFFECT: dict[str, str] = {
    "role": "there are no IAM roles here (S3 credentials come from AWS_* variables or config.yaml)",
    "framework_version": "the script runs on this machine's Python and its packages",
    "py_version": "the script runs on this machine's Python and its packages",
    "image_uri": "trainops runs no containers: the script runs on this machine's Python",
    "tags": "a spec's jobs carry no tags here (CreateTrainingJob's Tags, through the SageMaker "
    "API, are kept)",
}

#: SDK arguments that set a field: the section and its member.
MAPPED_ARGUMENTS: dict[str, tuple[str, str]] = {
    "max_run": ("stopping_condition", "max_runtime_in_seconds"),
    "max_wait": ("stopping_condition", "max_wait_time_in_seconds"),
    "checkpoint_s3_uri": ("checkpoint", "uri"),
    "checkpoint_local_path": ("checkpoint", "local_path"),
}


def sagemaker_habits(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with the SDK arguments of :data:`MAPPED_ARGUMENTS` moved to their fields and
    those of :data:`NO_LOCAL_EFFECT` dropped, with a note for each of those. Raises
    :class:`HabitError` for an argument given beside the field it sets, with another
    value."""
    data = dict(data)
    notes = [
        f"{name} is accepted and not used: {NO_LOCAL_EFFECT[name]}"
        for name in NO_LOCAL_EFFECT
        if name in data and data.pop(name) is not None
    ]
    for name, (section, member) in MAPPED_ARGUMENTS.items():
        if name not in data:
            continue
        value = data.pop(name)
        if value is None:
            continue
        given = _fields_given(data.get(section))
        if given.get(member, value) != value:
            raise HabitError(
                name,
                f"sets {section}.{member}, which is given too (as {given[member]!r}); keep one",
            )
        data[section] = given | {member: value}
    return data, notes


def _fields_given(section: Any) -> dict[str, Any]:
    """A section's fields as given: a mapping's items, a model's fields that were set."""
    if section is None:
        return {}
    if isinstance(section, BaseModel):
        return section.model_dump(exclude_unset=True)
    if isinstance(section, dict):
        return dict(section)
    raise HabitError("", f"must be a mapping, not {type(section).__name__}")
