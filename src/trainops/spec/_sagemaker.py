"""What a SageMaker Python SDK argument becomes here, for users porting an estimator.

An unknown spec field that is an argument of the SDK's ``EstimatorBase``, ``Framework``,
``Estimator`` or ``PyTorch`` classes (or of ``TrainingInput`` inside a channel) gets a message
naming the trainops field to use instead, or saying plainly that it has no meaning here.
"""

from __future__ import annotations

__all__ = ["CHANNEL_ARGUMENTS", "ESTIMATOR_ARGUMENTS", "FILE_SYSTEM_ARGUMENTS", "sagemaker_hint"]

_NO_CONTAINER = (
    "trainops runs no containers: the script runs with this machine's Python; list extra "
    "packages in source_dir/requirements.txt"
)
_NO_AWS = "has no meaning in trainops (no AWS account is involved); remove it"
_LOCAL_DISK = "has no meaning in trainops: hosts use the local disk under $TRAINOPS_HOME; remove it"
_NOT_YET = "is not supported by trainops; remove it"

ESTIMATOR_ARGUMENTS: dict[str, str] = {
    # Renamed: the trainops field carries the same meaning.
    "max_run": "use stopping_condition.max_runtime_in_seconds",
    "max_wait": "use stopping_condition.max_wait_time_in_seconds (spot jobs)",
    "enable_managed_spot_training": "use use_spot_instances",
    "max_retry_attempts": "use retry_strategy.maximum_retry_attempts",
    "checkpoint_s3_uri": "use checkpoint.uri (s3://, file:// or a local path)",
    "checkpoint_local_path": "use checkpoint.local_path (a directory under /opt/ml/)",
    "checkpoint_uri": "use checkpoint.uri",
    "input_mode": "use inputs.<channel>.mode (File, Pipe or FastFile)",
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
    "container_entry_point": "use entry_point",
    "container_arguments": "use hyperparameters (passed to the script as --name value)",
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
    "role": (
        "has no meaning in trainops (there are no IAM roles): S3 credentials come from AWS_* "
        "variables or config.yaml; remove it"
    ),
    "image_uri": _NO_CONTAINER,
    "image_name": _NO_CONTAINER,
    "train_image": _NO_CONTAINER,
    "framework_version": _NO_CONTAINER,
    "py_version": _NO_CONTAINER,
    "pytorch_version": _NO_CONTAINER,
    "tensorflow_version": _NO_CONTAINER,
    "transformers_version": _NO_CONTAINER,
    "script_mode": "has no meaning in trainops: scripts always run in script mode",
    "volume_size": _LOCAL_DISK,
    "volume_kms_key": _NO_AWS,
    "output_kms_key": _NO_AWS,
    "tags": _NO_AWS,
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
    "disable_output_compression": _NOT_YET,
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
