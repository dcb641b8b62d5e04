"""The job spec: everything a user declares about a training job.

Names follow the SageMaker Python SDK where it has one (``entry_point``, ``source_dir``,
``hyperparameters``, ``instance_type``, ``instance_count``, ``environment``, ``inputs``,
``output_path``, ``metric_definitions``) and the CreateTrainingJob API shapes in snake case
otherwise (``stopping_condition``, ``retry_strategy``, ``checkpoint``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from trainops.catalog import InstanceType, load_catalog
from trainops.protocol import DEFAULT_CHECKPOINT_PATH, RESERVED_HYPERPARAMETERS, SubmittedJob
from trainops.spec._argsize import argument_text, check_argument_size
from trainops.spec._base import FieldValueError, SpecModel
from trainops.spec._debugger import DebuggerHookConfig, with_rule_collections
from trainops.spec._distribution import (
    DistributionConfig,
    check_distribution,
    launchers_enabled,
)
from trainops.spec._names import JOB_NAME
from trainops.spec._profiler import (
    ProfilerConfig,
    RuleConfig,
    TensorBoardOutputConfig,
    check_rules,
)
from trainops.spec._raw import uri_problem
from trainops.spec._rule_catalog import CUSTOM, DEBUGGER, PROFILER, rule_definition
from trainops.spec._sagemaker import (
    CHANNEL_ARGUMENTS,
    ESTIMATOR_ARGUMENTS,
    FILE_SYSTEM_ARGUMENTS,
    HabitError,
    sagemaker_habits,
)
from trainops.spec._spot import ChaosSpec

__all__ = [
    "RESERVED_HYPERPARAMETERS",
    "AccessMode",
    "Channel",
    "ChaosSpec",
    "CheckpointConfig",
    "Compression",
    "DataType",
    "Distribution",
    "FileSystemSource",
    "FileSystemType",
    "InputMode",
    "JobSpec",
    "MetricDefinition",
    "RecordWrapping",
    "RetryStrategy",
    "StoppingCondition",
    "is_channel_name",
]

CHANNEL_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_LENGTH = 2500
MAX_CHANNELS = 20
MAX_METRICS = 40
MAX_ENVIRONMENT = 100
MAX_COMMAND_ITEMS = 100  # the API's ContainerEntrypoint and ContainerArguments
MAX_COMMAND_ITEM = 256
MAX_RUNTIME_LIMIT = 28 * 24 * 3600
MAX_WAIT_LIMIT = 2 * MAX_RUNTIME_LIMIT
DEFAULT_CHANNEL = "training"  # the SDK's name for a single input given as one URI

_DISTRIBUTION_ALIASES = {
    "fullyreplicated": "FullyReplicated",
    "replicated": "FullyReplicated",
    "shardedbykey": "ShardedByKey",
    "shardedbys3key": "ShardedByKey",
    "sharded": "ShardedByKey",
}


class Distribution(StrEnum):
    """How a channel's objects are spread over hosts."""

    FULLY_REPLICATED = "FullyReplicated"
    SHARDED_BY_KEY = "ShardedByKey"


class InputMode(StrEnum):
    """How a channel reaches the script (SageMaker's ``TrainingInputMode``).

    File copies the host's objects before the script starts; Pipe streams them through a named
    FIFO per epoch (``input/data/<channel>_<epoch>``); FastFile shows them as a lazy read-only
    file tree whose bytes are fetched when read.
    """

    FILE = "File"
    PIPE = "Pipe"
    FAST_FILE = "FastFile"


class Compression(StrEnum):
    """How the channel's objects are compressed (SageMaker's ``CompressionType``; Pipe only)."""

    NONE = "None"
    GZIP = "Gzip"


class RecordWrapping(StrEnum):
    """SageMaker's ``RecordWrapperType``: ``RecordIO`` frames each object (or each attribute of an
    augmented manifest line) as one RecordIO record in the pipe (Pipe only)."""

    NONE = "None"
    RECORDIO = "RecordIO"


class DataType(StrEnum):
    """What ``uri`` names (SageMaker's ``S3DataType``), for s3:// and file:// alike.

    ``S3Prefix``: every object under the prefix. ``ManifestFile``: a JSON array whose first
    element is ``{"prefix": "<uri>"}`` and whose other elements are keys relative to it.
    ``AugmentedManifestFile``: JSON Lines whose ``attribute_names`` are streamed, in that order
    (an attribute ending in ``-ref`` names an object whose bytes are streamed; Pipe only).
    """

    S3_PREFIX = "S3Prefix"
    MANIFEST_FILE = "ManifestFile"
    AUGMENTED_MANIFEST_FILE = "AugmentedManifestFile"


class AccessMode(StrEnum):
    """Whether the script may write into a file-system channel."""

    RO = "ro"
    RW = "rw"


class FileSystemType(StrEnum):
    """The kind of shared file system a file-system channel reads (informational here)."""

    EFS = "EFS"
    FSX_LUSTRE = "FSxLustre"
    NFS = "NFS"
    LOCAL = "Local"


class FileSystemSource(SpecModel):
    """A directory every host already sees (SageMaker's ``FileSystemDataSource``: EFS, FSx for
    Lustre; here also NFS or a local path on one machine), shown at ``input/data/<channel>``
    without copying."""

    sdk_arguments = FILE_SYSTEM_ARGUMENTS

    directory_path: str = Field(
        min_length=1, description="Absolute path of the directory on every host"
    )
    access_mode: AccessMode = Field(
        default=AccessMode.RO, description="ro (read-only, the default) or rw"
    )
    type: FileSystemType = Field(default=FileSystemType.LOCAL)
    id: str | None = Field(default=None, max_length=64, description="e.g. fs-0123 (recorded only)")

    @field_validator("directory_path")
    @classmethod
    def _directory_path(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("must not contain a NUL character")
        if not value.startswith("/"):
            raise ValueError(f"{value!r} is not absolute: name the directory from /")
        return value

    @field_validator("access_mode", mode="before")
    @classmethod
    def _access_mode(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lower() not in ("ro", "rw"):
            raise ValueError(f"{value!r} is not an access mode; use ro or rw")
        return value.lower() if isinstance(value, str) else value

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> Any:
        return _enum_value(FileSystemType, value, "file system type")


class Channel(SpecModel):
    """One input channel: objects under ``uri`` (or a shared directory, ``file_system``) appear
    in ``input/data/<channel>``, or stream through its FIFOs in Pipe mode."""

    sdk_arguments = CHANNEL_ARGUMENTS

    uri: str | None = Field(
        default=None, description="s3://, file:// or a local path (made absolute on submit)"
    )
    file_system: FileSystemSource | None = Field(
        default=None, description="A shared directory instead of a uri (File mode only)"
    )
    content_type: str | None = Field(default=None, description="MIME type recorded for the script")
    distribution: Distribution = Field(default=Distribution.FULLY_REPLICATED)
    shuffle_seed: int | None = Field(
        default=None,
        description="Seed that permutes object order (ShuffleConfig); Pipe reshuffles per epoch",
    )
    mode: InputMode = Field(default=InputMode.FILE, description="File, Pipe or FastFile")
    compression: Compression = Field(default=Compression.NONE, description="None or Gzip (Pipe)")
    record_wrapping: RecordWrapping = Field(
        default=RecordWrapping.NONE, description="None or RecordIO (Pipe)"
    )
    s3_data_type: DataType = Field(
        default=DataType.S3_PREFIX,
        description="S3Prefix, ManifestFile or AugmentedManifestFile (what uri names)",
    )
    attribute_names: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="AugmentedManifestFile: the attributes streamed, in order",
    )

    def __init__(self, uri: str | None = None, /, **data: Any) -> None:
        if uri is not None:
            data["uri"] = uri
        super().__init__(**data)

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        return None if value is None else _check_uri(value)

    @field_validator("distribution", mode="before")
    @classmethod
    def _distribution(cls, value: Any) -> Any:
        if isinstance(value, str):
            found = _DISTRIBUTION_ALIASES.get(value.replace("_", "").replace("-", "").lower())
            if found is None:
                raise ValueError(
                    f"{value!r} is not a distribution; use FullyReplicated or ShardedByKey"
                )
            return found
        return value

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return _enum_value(InputMode, value, "input mode")

    @field_validator("compression", mode="before")
    @classmethod
    def _compression(cls, value: Any) -> Any:
        return _enum_value(Compression, "None" if value is None else value, "compression")

    @field_validator("record_wrapping", mode="before")
    @classmethod
    def _record_wrapping(cls, value: Any) -> Any:
        return _enum_value(RecordWrapping, "None" if value is None else value, "record wrapping")

    @field_validator("s3_data_type", mode="before")
    @classmethod
    def _s3_data_type(cls, value: Any) -> Any:
        return _enum_value(DataType, value, "data type")

    @field_validator("attribute_names")
    @classmethod
    def _attribute_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or len(name) > 256 or "\x00" in name:
                raise ValueError(f"attribute name {name!r} must be 1-256 characters, no NUL")
        if len(set(value)) != len(value):
            raise ValueError("attribute names must be unique")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Channel:
        for problem in _channel_problems(self):
            raise ValueError(problem)
        return self


def _channel_problems(channel: Channel) -> list[str]:
    """What does not fit together in one channel (SageMaker's rules where it has them)."""
    problems = []
    if (channel.uri is None) == (channel.file_system is None):
        problems.append("give either uri or file_system (exactly one)")
    pipe = channel.mode is InputMode.PIPE
    if channel.file_system is not None:
        if channel.mode is not InputMode.FILE:
            problems.append("a file_system channel is File mode only (it is never copied)")
        if channel.distribution is not Distribution.FULLY_REPLICATED:
            problems.append("a file_system channel is FullyReplicated: every host sees it whole")
        if channel.s3_data_type is not DataType.S3_PREFIX or channel.shuffle_seed is not None:
            problems.append("s3_data_type and shuffle_seed apply to uri channels only")
    if channel.compression is Compression.GZIP and not pipe:
        problems.append("compression Gzip is for Pipe mode only (leave it None in File mode)")
    if channel.record_wrapping is RecordWrapping.RECORDIO and not pipe:
        problems.append("record_wrapping RecordIO is for Pipe mode only")
    augmented = channel.s3_data_type is DataType.AUGMENTED_MANIFEST_FILE
    if augmented and not pipe:
        problems.append("s3_data_type AugmentedManifestFile is for Pipe mode only")
    if augmented and not channel.attribute_names:
        problems.append("s3_data_type AugmentedManifestFile needs attribute_names")
    if channel.attribute_names and not augmented:
        problems.append("attribute_names apply to s3_data_type AugmentedManifestFile only")
    return problems[:1]


def _enum_value(enum: type[StrEnum], value: Any, what: str) -> Any:
    """``value`` as a member of ``enum``, matched without regard to case, ``_`` or ``-``."""
    if not isinstance(value, str):
        return value
    wanted = value.replace("_", "").replace("-", "").lower()
    for member in enum:
        if member.value.replace("_", "").lower() == wanted:
            return member
    choices = ", ".join(member.value for member in enum)
    raise ValueError(f"{value!r} is not a {what}; use {choices}")


class MetricDefinition(SpecModel):
    """A metric scraped from the job's logs: the first capture group of ``regex`` is the value."""

    name: str = Field(min_length=1, max_length=255)
    regex: str = Field(min_length=1, max_length=500)

    @model_validator(mode="before")
    @classmethod
    def _sdk_casing(cls, value: Any) -> Any:
        """The SDK's and the API's casing (``{"Name": ..., "Regex": ...}``) taken as ours."""
        if isinstance(value, dict) and ("Name" in value or "Regex" in value):
            renamed = {"Name": "name", "Regex": "regex"}
            return {renamed.get(k, k): v for k, v in value.items()}
        return value

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        if compiled.groups < 1:
            raise ValueError("needs a capture group, e.g. 'loss=([0-9.]+)'")
        return value


class CheckpointConfig(SpecModel):
    """Where checkpoints are synchronised: ``uri`` in object storage, ``local_path`` on each host."""

    uri: str
    local_path: str = DEFAULT_CHECKPOINT_PATH

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        return _check_uri(value)

    @field_validator("local_path")
    @classmethod
    def _local_path(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("must not contain a NUL character")
        parts = Path(value).parts
        if not value.startswith("/opt/ml/") or ".." in parts or len(parts) < 4:
            raise ValueError(
                "must be a directory under /opt/ml/ (it is re-rooted in each host's job tree)"
            )
        return value.rstrip("/")


class StoppingCondition(SpecModel):
    """Limits on the job's run time (and, for a spot job, on the whole wait for it)."""

    max_runtime_in_seconds: int = Field(default=86400, ge=1, le=MAX_RUNTIME_LIMIT)
    max_wait_time_in_seconds: int | None = Field(
        default=None,
        ge=1,
        le=MAX_WAIT_LIMIT,
        strict=True,  # whole seconds: not true (1), not "600"
        description="Spot jobs: the limit from submission to the end, capacity waits, every "
        "attempt and every retry included; at least max_runtime_in_seconds",
    )
    grace_period_in_seconds: int = Field(
        default=120, ge=0, le=3600, description="SIGTERM to SIGKILL delay when stopping"
    )


class RetryStrategy(SpecModel):
    """How often a job that failed for an internal reason is run again."""

    maximum_retry_attempts: int = Field(default=0, ge=0, le=30)


def _check_hyperparameter_value(value: Any) -> Any:
    if value is None:
        raise ValueError("has no value")
    try:
        # allow_nan=False: JSON has no Infinity or NaN; they would arrive as null.
        encoded = value if isinstance(value, str) else json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValueError(
            "contains inf or nan, which JSON cannot carry (write it as a string, e.g. 'inf')"
        ) from None
    except TypeError:
        raise ValueError("value must be a string, number, boolean, list or mapping") from None
    if not _passable(argument_text(value)):  # its SM_* variables are ASCII-only JSON
        raise ValueError(
            "contains a NUL character or unpaired surrogate, which no process argument can hold"
        )
    if len(encoded) > MAX_HYPERPARAMETER_LENGTH:
        raise ValueError(
            f"value is {len(encoded)} characters encoded; at most {MAX_HYPERPARAMETER_LENGTH}"
        )
    return value


HyperparameterValue = Annotated[Any, AfterValidator(_check_hyperparameter_value)]


class JobSpec(SpecModel):
    """A complete training-job declaration (the YAML file and ``TrainingJob`` share it)."""

    sdk_arguments = ESTIMATOR_ARGUMENTS
    _sagemaker_notes: tuple[str, ...] = PrivateAttr(default=())
    _input_mode: str | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _sagemaker_habits(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]) -> JobSpec:
        """The SDK's habits kept (``sagemaker_habits``); ``input_mode`` is the mode of every
        channel that names none (kept, so that ``fit(inputs=...)`` channels get it too)."""
        if not isinstance(data, dict):
            return handler(data)
        try:
            data, notes = sagemaker_habits(data)
        except HabitError as exc:
            raise FieldValueError(exc.field, str(exc)) from None
        mode = data.pop("input_mode", None)
        if mode is not None and data.get("inputs") is not None:
            data["inputs"] = _with_mode(channels_from_sdk(data["inputs"]), mode)
        spec = handler(data)
        spec._sagemaker_notes, spec._input_mode = tuple(notes), mode
        return spec

    @property
    def sagemaker_notes(self) -> tuple[str, ...]:
        """One line per SageMaker SDK argument given that has no effect here."""
        return self._sagemaker_notes

    entry_point: str = Field(min_length=1)
    source_dir: str | None = None
    job_name: str | None = None
    base_job_name: str | None = None
    hyperparameters: dict[str, HyperparameterValue] = Field(default_factory=dict)
    instance_type: str = "ml.m5.large"
    instance_count: int = Field(default=1, ge=1, le=64)
    environment: dict[str, str] = Field(default_factory=dict)
    inputs: dict[str, Channel] = Field(default_factory=dict)
    output_path: str | None = None
    disable_output_compression: bool = Field(
        default=False,
        description="Upload the model and the output data as files (under output/model/ and "
        "output/data/) instead of model.tar.gz and output.tar.gz: SageMaker's "
        "OutputDataConfig.CompressionType NONE, for large models",
    )
    checkpoint: CheckpointConfig | None = None
    metric_definitions: list[MetricDefinition] = Field(default_factory=list)
    stopping_condition: StoppingCondition = Field(default_factory=StoppingCondition)
    retry_strategy: RetryStrategy = Field(default_factory=RetryStrategy)
    use_spot_instances: bool = Field(
        default=False,
        description="Managed spot training: the job may be interrupted, waits for capacity and "
        "resumes from its checkpoint; needs stopping_condition.max_wait_time_in_seconds",
    )
    chaos: ChaosSpec | None = Field(
        default=None, description="A seeded schedule of rehearsal interruptions (spot jobs)"
    )
    mount_opt_ml: bool = Field(
        default=True,
        description="Show each host's job tree at the real /opt/ml to its processes (a private "
        "mount namespace), as SageMaker does, wherever the machine allows it (false: the SM_* "
        "variables name the tree under $TRAINOPS_HOME); nothing is written to /opt",
    )
    profiler_config: ProfilerConfig | None = None
    rules: list[RuleConfig] = Field(default_factory=list)
    debugger_hook_config: DebuggerHookConfig | None = Field(
        default=None,
        description="SageMaker's DebuggerHookConfig; debugger rules add the collections they "
        "need (and a default hook configuration where none is given); false: none",
    )
    tensorboard_output_config: TensorBoardOutputConfig | None = None
    # Last: its checks read entry_point, instance_type and instance_count, validated before it.
    distribution: DistributionConfig = Field(default_factory=DistributionConfig)
    container_entrypoint: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_COMMAND_ITEMS,
        description="A command to run instead of the entry point (SageMaker's "
        "AlgorithmSpecification.ContainerEntrypoint): an argv list, never a shell string, run "
        "in the code directory with the host's tree shown at /opt/ml (needs mount_opt_ml)",
    )
    container_args: list[str] = Field(
        default_factory=list,
        max_length=MAX_COMMAND_ITEMS,
        description="The arguments after container_entrypoint (ContainerArguments)",
    )
    python: str | None = Field(
        default=None,
        max_length=4096,
        description="The interpreter that runs the script (default: the host agent's own): one "
        "the server's images setting names, on every host; the SageMaker API sets it from there",
    )

    @field_validator("entry_point")
    @classmethod
    def _entry_point(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("must not contain a NUL character")
        if Path(value).is_absolute() or ".." in Path(value).parts:
            raise ValueError("must be a path relative to source_dir, without '..'")
        return value

    @field_validator("container_entrypoint", "container_args")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        for i, item in enumerate(value or []):
            if not item or len(item) > MAX_COMMAND_ITEM or "\x00" in item:
                raise ValueError(
                    f"item {i} must be 1-{MAX_COMMAND_ITEM} characters without a NUL character"
                )
        return value

    @model_validator(mode="after")
    def _container_command(self) -> JobSpec:
        """A container command names the /opt/ml tree itself and is its own launcher."""
        if self.container_entrypoint is None:
            if self.container_args:
                raise FieldValueError("container_args", "needs container_entrypoint")
            return self
        if not self.mount_opt_ml:
            raise FieldValueError(
                "mount_opt_ml",
                "is false, but container_entrypoint runs a command that reads the tree at "
                "/opt/ml, as a SageMaker container does",
            )
        if launchers_enabled(self.distribution):
            raise FieldValueError(
                "distribution",
                "a launcher cannot start container_entrypoint: the command starts its own "
                "processes (as a SageMaker container's entrypoint does)",
            )
        return self

    @field_validator("python")
    @classmethod
    def _python(cls, value: str | None) -> str | None:
        if value is not None and (
            not Path(value).is_absolute() or any(ord(c) < 32 or ord(c) == 127 for c in value)
        ):
            raise ValueError("must be an absolute path without control characters")
        return value

    @field_validator("source_dir")
    @classmethod
    def _source_dir(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("must not contain a NUL character")
        return value

    @field_validator("job_name", "base_job_name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not JOB_NAME.match(value):
            raise ValueError(
                "must be 1-63 letters, digits or hyphens, starting and ending with a letter or digit"
            )
        return value

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        try:
            load_catalog().get(value)
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None
        return value

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > MAX_HYPERPARAMETERS:
            raise ValueError(f"{len(value)} hyperparameters; at most {MAX_HYPERPARAMETERS}")
        for key in value:
            _check_hyperparameter_name(key)
        check_argument_size(value)
        return value

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_ENVIRONMENT:
            raise ValueError(f"{len(value)} variables; at most {MAX_ENVIRONMENT}")
        for key, item in value.items():
            if not ENV_NAME.match(key) or len(key) > 512:
                raise ValueError(f"{key!r} is not a valid environment variable name")
            if key.startswith("TRAINOPS_"):
                raise ValueError(f"{key!r}: the TRAINOPS_ prefix is reserved")
            if len(item) > 512:
                raise ValueError(f"{key!r}: value longer than 512 characters")
            if not _passable(item):
                raise ValueError(f"{key!r}: value contains a NUL character or unpaired surrogate")
        return value

    @field_validator("inputs", mode="before")
    @classmethod
    def _plain_uris(cls, value: Any) -> Any:
        return channels_from_sdk(value)

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: dict[str, Channel]) -> dict[str, Channel]:
        if len(value) > MAX_CHANNELS:
            raise ValueError(f"{len(value)} channels; at most {MAX_CHANNELS}")
        for name in value:
            if not is_channel_name(name):
                raise ValueError(
                    f"channel name {name!r} must match [A-Za-z0-9._-]+, be at most 64 characters "
                    "and not be '.' or '..' (it names a directory under input/data/)"
                )
        return value

    @field_validator("output_path")
    @classmethod
    def _output_path(cls, value: str | None) -> str | None:
        return None if value is None else _check_uri(value)

    @field_validator("metric_definitions")
    @classmethod
    def _metrics(cls, value: list[MetricDefinition]) -> list[MetricDefinition]:
        if len(value) > MAX_METRICS:
            raise ValueError(f"{len(value)} metric definitions; at most {MAX_METRICS}")
        names = [m.name for m in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"metric names must be unique; repeated: {', '.join(dupes)}")
        return value

    @field_validator("rules", mode="before")
    @classmethod
    def _rule_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | dict) else value

    @field_validator("rules")
    @classmethod
    def _rules(cls, value: list[RuleConfig]) -> list[RuleConfig]:
        return check_rules(value)

    @model_validator(mode="after")
    def _spot(self) -> JobSpec:
        """SageMaker's rules for managed spot: a spot job says how long it may wait in all (at
        least its run time); max wait and chaos mean nothing without spot."""
        problem = _spot_problem(self)
        if problem is not None:
            raise FieldValueError(*problem)
        return self

    @model_validator(mode="after")
    def _profiling(self) -> JobSpec:
        """Profiler rules read the profiler's data: they turn it on at its defaults, and
        cannot run when it is disabled."""
        if not any(rule.kind == PROFILER for rule in self.rules):
            return self
        if self.profiler_config is None:
            object.__setattr__(self, "profiler_config", ProfilerConfig())
        elif self.profiler_config.disable_profiler:
            raise ValueError(
                "rules: profiler rules need the profiler, but profiler_config.disable_profiler "
                "is true"
            )
        return self

    @field_validator("debugger_hook_config", mode="before")
    @classmethod
    def _hook_switch(cls, value: Any) -> Any:
        """``true``: a hook at its defaults; ``false``: none (see :meth:`_no_hook`)."""
        return {} if value is True else (None if value is False else value)

    @model_validator(mode="before")
    @classmethod
    def _no_hook(cls, value: Any) -> Any:
        """``debugger_hook_config: false`` (the SDK's way to turn the hook off) cannot stand
        beside debugger rules, which read what it saves."""
        if isinstance(value, dict) and value.get("debugger_hook_config") is False:
            rules = value.get("rules") or []
            for rule in [rules] if isinstance(rules, str | dict) else rules:
                name = rule.get("rule") if isinstance(rule, dict) else getattr(rule, "rule", rule)
                custom = (rule.get("source") if isinstance(rule, dict) else None) or getattr(
                    rule, "source", None
                )
                with contextlib.suppress(KeyError, TypeError):
                    if custom is not None or rule_definition(str(name)).kind == DEBUGGER:
                        raise FieldValueError(
                            "debugger_hook_config",
                            "is false, but debugger rules read the tensors the debugger hook saves",
                        )
        return value

    @model_validator(mode="after")
    def _debugger(self) -> JobSpec:
        """Debugger rules read the tensors the hook saves: their collections join the hook's
        configuration (one at its defaults where none is given), as the SDK does."""
        rules = [rule_definition(str(r.rule)) for r in self.rules if r.kind == DEBUGGER]
        custom = any(r.kind == CUSTOM for r in self.rules)
        try:
            merged = with_rule_collections(self.debugger_hook_config, rules, needed=custom)
        except ValueError as exc:
            raise FieldValueError("debugger_hook_config.collection_configs", str(exc)) from None
        object.__setattr__(self, "debugger_hook_config", merged)
        return self

    @field_validator("distribution")
    @classmethod
    def _distribution(cls, value: DistributionConfig, info: ValidationInfo) -> DistributionConfig:
        known = info.data
        if not {"entry_point", "instance_type", "instance_count"} <= set(known):
            return value  # those fields failed; their own errors say why
        instance = load_catalog().get(known["instance_type"])
        return check_distribution(
            value, known["entry_point"], instance, int(known["instance_count"])
        )

    @property
    def instance(self) -> InstanceType:
        """The catalog entry of ``instance_type``."""
        return load_catalog().get(self.instance_type)

    def view(self) -> SubmittedJob:
        """The typed view everyone downstream reads (its JSON is what the server stores)."""
        return SubmittedJob.from_json(self.model_dump(mode="json"))


def _spot_problem(spec: JobSpec) -> tuple[str, str] | None:
    """The first field that breaks managed spot's rules, with the fix; None if none does."""
    stopping = spec.stopping_condition
    wait, runtime = stopping.max_wait_time_in_seconds, stopping.max_runtime_in_seconds
    if not spec.use_spot_instances:
        if wait is not None:
            return (
                "stopping_condition.max_wait_time_in_seconds",
                "applies to spot jobs only: set use_spot_instances: true, or remove it",
            )
        if spec.chaos is not None:
            return ("chaos", "interrupts spot jobs only: set use_spot_instances: true")
        return None
    if wait is None:
        return (
            "stopping_condition.max_wait_time_in_seconds",
            "a spot job needs it: how long the job may take in all, waits for capacity "
            f"included; at least max_runtime_in_seconds ({runtime}), e.g. {2 * runtime}",
        )
    if wait < runtime:
        return (
            "stopping_condition.max_wait_time_in_seconds",
            f"is {wait}, less than max_runtime_in_seconds ({runtime}); make it at least {runtime}",
        )
    return None


def is_channel_name(name: str) -> bool:
    """SageMaker's rule (``[A-Za-z0-9._-]+``, at most 64) and a safe directory name: not ``.``/``..``."""
    return bool(CHANNEL_NAME.match(name)) and len(name) <= 64 and name not in (".", "..")


def _with_mode(inputs: Any, mode: Any) -> Any:
    """``inputs`` with ``mode`` for each channel that names none."""
    if not isinstance(inputs, dict):
        return inputs
    found = {}
    for name, channel in inputs.items():
        given = channel.model_dump(exclude_unset=True) if isinstance(channel, Channel) else channel
        found[name] = {"mode": mode} | given if isinstance(given, dict) else given
    return found


def channels_from_sdk(value: Any) -> Any:
    """The SDK's ``fit(inputs=...)`` shapes as channel mappings.

    A plain URI string for a channel is a File-mode channel (``{"train": "s3://b/x/"}``), and a
    single URI for all inputs is the channel ``training``, as ``Estimator.fit("s3://...")`` does.
    """
    if isinstance(value, str | os.PathLike):
        return {DEFAULT_CHANNEL: {"uri": os.fspath(value)}}
    if isinstance(value, dict):
        return {
            k: {"uri": os.fspath(v)} if isinstance(v, str | os.PathLike) else v
            for k, v in value.items()
        }
    return value


def _check_uri(value: str) -> str:
    problem = uri_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _passable(text: str) -> bool:
    """Whether ``text`` can be part of a process's arguments or environment."""
    if "\0" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_hyperparameter_name(key: str) -> None:
    if not key or len(key) > 256:
        raise ValueError(f"name {key!r} must be 1-256 characters")
    if "=" in key or not _passable(key):
        # The name becomes the variable SM_HP_<NAME>: '=' would end the name, NUL the string.
        raise ValueError(f"name {key!r} must not contain '=', NUL or unpaired surrogates")
    if key in RESERVED_HYPERPARAMETERS:
        raise ValueError(f"{key!r} is reserved: trainops sets it from the job spec")
