"""The one typed view of a submitted job, read by control plane, server views and agents alike.

A user's spec is validated once, by the pydantic models of ``trainops.spec``, which hold every
default; what the server stores is that model's complete JSON dump. Everyone after that reads
the dump through :class:`SubmittedJob`: immutable, strict (a missing or unknown field is an
error naming it, never a silent second copy of a default) and importable without pydantic, so
a host agent still starts fast. ``JobSpec.view()`` builds one; ``to_json`` gives the dump back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from trainops.protocol._observe import DebugHookSpec, ProfilerSpec, RuleSpec, TensorBoardSpec

__all__ = [
    "DEFAULT_CHECKPOINT_PATH",
    "LAUNCHER_FLAGS",
    "ChannelSpec",
    "ChaosPlan",
    "CheckpointSpec",
    "DataParallelSpec",
    "DistributionSpec",
    "EnabledSpec",
    "FileSystemSpec",
    "MetricSpec",
    "ModelParallelSpec",
    "MpiSpec",
    "RetrySpec",
    "SmDistributedSpec",
    "SpecViewError",
    "StoppingSpec",
    "SubmittedJob",
]

_R = TypeVar("_R")
SHARDED = "ShardedByKey"
# SageMaker's checkpoint directory, re-rooted in each host's tree; used when the spec names none.
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"


class SpecViewError(ValueError):
    """A stored spec does not have the shape of a validated JobSpec dump."""


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise SpecViewError(f"{where}: expected a mapping, got {type(raw).__name__}")
    return raw


def _fields(cls: type, raw: Any, where: str) -> dict[str, Any]:
    """``raw``'s values for ``cls``'s fields, refusing missing and unknown keys."""
    raw = _mapping(raw, where)
    names = [f.name for f in fields(cls)]
    missing = [n for n in names if n not in raw]
    unknown = sorted(set(raw) - set(names))
    if missing or unknown:
        problems = [f"missing {', '.join(missing)}"] if missing else []
        problems += [f"unknown {', '.join(unknown)}"] if unknown else []
        raise SpecViewError(f"{where}: {'; '.join(problems)}")
    return {n: raw[n] for n in names}


def _argv(raw: Any, where: str) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list | tuple) or not all(isinstance(a, str) for a in raw):
        raise SpecViewError(f"{where}: expected a list of strings")
    return list(raw)


@dataclass(frozen=True, slots=True)
class FileSystemSpec:
    """A shared directory shown at ``input/data/<name>`` without copying."""

    directory_path: str
    access_mode: str  # "ro" or "rw"
    type: str
    id: str | None

    @property
    def writable(self) -> bool:
        return self.access_mode == "rw"


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """One input channel: objects under ``uri`` (or ``file_system``) appear in
    ``input/data/<name>``, or stream through ``input/data/<name>_<epoch>`` in Pipe mode."""

    name: str
    uri: str | None
    content_type: str | None
    distribution: str
    shuffle_seed: int | None
    mode: str  # File, Pipe or FastFile
    file_system: FileSystemSpec | None  # a shared directory instead of uri
    compression: str  # None or Gzip
    record_wrapping: str  # None or RecordIO
    s3_data_type: str  # S3Prefix, ManifestFile or AugmentedManifestFile
    attribute_names: tuple[str, ...]

    @property
    def sharded(self) -> bool:
        return self.distribution == SHARDED

    @classmethod
    def from_json(cls, name: str, raw: Mapping[str, Any]) -> ChannelSpec:
        where = f"inputs.{name}"
        data = _fields(cls, {"name": name, **_mapping(raw, where)}, where)
        if data["file_system"] is not None:
            data["file_system"] = FileSystemSpec(
                **_fields(FileSystemSpec, data["file_system"], f"{where}.file_system")
            )
        data["attribute_names"] = tuple(data["attribute_names"])
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        found = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}
        found["file_system"] = None if self.file_system is None else asdict(self.file_system)
        found["attribute_names"] = list(self.attribute_names)
        return found


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric scraped from the logs: the first capture group of ``regex`` is the value."""

    name: str
    regex: str


@dataclass(frozen=True, slots=True)
class CheckpointSpec:
    """Where checkpoints are mirrored: ``uri`` in object storage, ``local_path`` on each host."""

    uri: str
    local_path: str


@dataclass(frozen=True, slots=True)
class StoppingSpec:
    """Limits on the job's run time."""

    max_runtime_in_seconds: int
    grace_period_in_seconds: int
    max_wait_time_in_seconds: int | None  # spot jobs only (None in specs stored before spot)


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    """A spot job's seeded schedule of rehearsal interruptions (the spec's ``chaos``)."""

    seed: int
    interruptions: int
    mean_seconds_between: float
    capacity_gap_seconds: tuple[float, float]
    notice_seconds: float
    hosts: str  # "one" or "all"

    @classmethod
    def from_json(cls, raw: Any) -> ChaosPlan:
        data = _fields(cls, raw, "chaos")
        gap = data["capacity_gap_seconds"]
        if not isinstance(gap, list | tuple) or len(gap) != 2:
            raise SpecViewError("chaos.capacity_gap_seconds: expected [min, max]")
        data["capacity_gap_seconds"] = (float(gap[0]), float(gap[1]))
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["capacity_gap_seconds"] = list(self.capacity_gap_seconds)
        return data


@dataclass(frozen=True, slots=True)
class RetrySpec:
    """How often a job that failed for an internal reason runs again."""

    maximum_retry_attempts: int


@dataclass(frozen=True, slots=True)
class EnabledSpec:
    """A launcher switch."""

    enabled: bool


@dataclass(frozen=True, slots=True)
class MpiSpec:
    enabled: bool
    processes_per_host: int | None
    custom_mpi_options: str


@dataclass(frozen=True, slots=True)
class DataParallelSpec:
    enabled: bool
    custom_mpi_options: str


@dataclass(frozen=True, slots=True)
class ModelParallelSpec:
    enabled: bool
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SmDistributedSpec:
    dataparallel: DataParallelSpec
    modelparallel: ModelParallelSpec


#: Spec launcher switch (``distribution.<name>.enabled``) -> the SageMaker hyperparameter the
#: SDK sets for it; the spec reads the switches from here (``smdistributed.dataparallel`` aside).
LAUNCHER_FLAGS = {
    "torch_distributed": "sagemaker_torch_distributed_enabled",
    "pytorchddp": "sagemaker_pytorch_ddp_enabled",
    "mpi": "sagemaker_mpi_enabled",
    "parameter_server": "sagemaker_parameter_server_enabled",
    "multi_worker_mirrored_strategy": "sagemaker_multi_worker_mirrored_strategy_enabled",
}


@dataclass(frozen=True, slots=True)
class DistributionSpec:
    """Processes per host (resolved at validation) and the launcher that starts them."""

    torch_distributed: EnabledSpec
    pytorchddp: EnabledSpec
    mpi: MpiSpec
    parameter_server: EnabledSpec
    multi_worker_mirrored_strategy: EnabledSpec
    smdistributed: SmDistributedSpec
    processes_per_host: int
    oversubscribe: bool

    @property
    def launcher(self) -> str:
        """The enabled launcher's spec name, ``smdistributed.dataparallel``, or ``plain``."""
        for name in LAUNCHER_FLAGS:
            if getattr(self, name).enabled:
                return name
        return "smdistributed.dataparallel" if self.smdistributed.dataparallel.enabled else "plain"

    def framework_hyperparameters(self) -> dict[str, Any]:
        """The ``sagemaker_*`` (and ``mp_parameters``) hyperparameters the SDK would send."""
        found: dict[str, Any] = {
            flag: True for name, flag in LAUNCHER_FLAGS.items() if getattr(self, name).enabled
        }
        if self.mpi.enabled:
            found["sagemaker_mpi_num_of_processes_per_host"] = self.processes_per_host
            found["sagemaker_mpi_custom_mpi_options"] = self.mpi.custom_mpi_options
        data_parallel = self.smdistributed.dataparallel
        if data_parallel.enabled:
            found["sagemaker_distributed_dataparallel_enabled"] = True
            found["sagemaker_distributed_dataparallel_custom_mpi_options"] = (
                data_parallel.custom_mpi_options
            )
        if self.smdistributed.modelparallel.enabled:
            found["mp_parameters"] = dict(self.smdistributed.modelparallel.parameters)
        return found

    @classmethod
    def from_json(cls, raw: Any) -> DistributionSpec:
        data = _fields(cls, raw, "distribution")
        for name in ("torch_distributed", "pytorchddp", "parameter_server"):
            data[name] = _record(EnabledSpec, data[name], f"distribution.{name}")
        name = "multi_worker_mirrored_strategy"
        data[name] = _record(EnabledSpec, data[name], f"distribution.{name}")
        data["mpi"] = _record(MpiSpec, data["mpi"], "distribution.mpi")
        smd = _fields(SmDistributedSpec, data["smdistributed"], "distribution.smdistributed")
        data["smdistributed"] = SmDistributedSpec(
            _record(DataParallelSpec, smd["dataparallel"], "smdistributed.dataparallel"),
            _record(ModelParallelSpec, smd["modelparallel"], "smdistributed.modelparallel"),
        )
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _record(cls: type[_R], raw: Any, where: str) -> _R:
    return cls(**_fields(cls, raw, where))


@dataclass(frozen=True, slots=True)
class SubmittedJob:
    """A validated job spec, as stored and assigned. Field names are the spec's own."""

    entry_point: str
    source_dir: str | None
    job_name: str | None
    base_job_name: str | None
    hyperparameters: dict[str, Any]
    instance_type: str
    instance_count: int
    environment: dict[str, str]
    inputs: tuple[ChannelSpec, ...]
    output_path: str | None
    disable_output_compression: bool  # outputs uploaded as files, not as archives
    checkpoint: CheckpointSpec | None
    metric_definitions: tuple[MetricSpec, ...]
    stopping_condition: StoppingSpec
    retry_strategy: RetrySpec
    use_spot_instances: bool
    chaos: ChaosPlan | None
    mount_opt_ml: bool
    profiler_config: ProfilerSpec | None
    rules: tuple[RuleSpec, ...]
    debugger_hook_config: DebugHookSpec | None
    tensorboard_output_config: TensorBoardSpec | None
    distribution: DistributionSpec
    python: str | None  # the script's interpreter; None: the agent's own
    container_entrypoint: list[str] | None  # a command run instead of entry_point (argv)
    container_args: list[str]

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> SubmittedJob:
        if isinstance(raw, Mapping) and "debugger_hook_config" not in raw:
            raw = {**raw, "debugger_hook_config": None}  # stored before the debugger existed
        if isinstance(raw, Mapping) and "use_spot_instances" not in raw:
            raw = {**raw, "use_spot_instances": False, "chaos": None}  # stored before spot
        if isinstance(raw, Mapping) and "python" not in raw:
            raw = {**raw, "python": None}  # stored before image mappings
        if isinstance(raw, Mapping) and "container_entrypoint" not in raw:
            raw = {**raw, "container_entrypoint": None, "container_args": []}  # stored before
        if isinstance(raw, Mapping) and "disable_output_compression" not in raw:
            raw = {**raw, "disable_output_compression": False}  # stored before the field
        data = _fields(cls, raw, "spec")
        inputs = _mapping(data["inputs"], "inputs")
        data["inputs"] = tuple(ChannelSpec.from_json(k, v) for k, v in inputs.items())
        if not isinstance(data["metric_definitions"], list | tuple):
            raise SpecViewError("metric_definitions: expected a list")
        data["metric_definitions"] = tuple(
            MetricSpec(**_fields(MetricSpec, m, f"metric_definitions[{i}]"))
            for i, m in enumerate(data["metric_definitions"])
        )
        if data["checkpoint"] is not None:
            data["checkpoint"] = CheckpointSpec(
                **_fields(CheckpointSpec, data["checkpoint"], "checkpoint")
            )
        stopping = data["stopping_condition"]
        if isinstance(stopping, Mapping) and "max_wait_time_in_seconds" not in stopping:
            stopping = {**stopping, "max_wait_time_in_seconds": None}  # stored before spot
        data["stopping_condition"] = StoppingSpec(
            **_fields(StoppingSpec, stopping, "stopping_condition")
        )
        if data["chaos"] is not None:
            data["chaos"] = ChaosPlan.from_json(data["chaos"])
        data["retry_strategy"] = RetrySpec(
            **_fields(RetrySpec, data["retry_strategy"], "retry_strategy")
        )
        data["distribution"] = DistributionSpec.from_json(data["distribution"])
        data["container_entrypoint"] = _argv(data["container_entrypoint"], "container_entrypoint")
        data["container_args"] = _argv(data["container_args"], "container_args") or []
        if data["profiler_config"] is not None:
            data["profiler_config"] = ProfilerSpec.from_json(data["profiler_config"])
        if not isinstance(data["rules"], list | tuple):
            raise SpecViewError("rules: expected a list")
        data["rules"] = tuple(
            RuleSpec.from_json(r, f"rules[{i}]") for i, r in enumerate(data["rules"])
        )
        if data["debugger_hook_config"] is not None:
            data["debugger_hook_config"] = DebugHookSpec.from_json(data["debugger_hook_config"])
        if data["tensorboard_output_config"] is not None:
            data["tensorboard_output_config"] = TensorBoardSpec.from_json(
                data["tensorboard_output_config"]
            )
        data["hyperparameters"] = dict(_mapping(data["hyperparameters"], "hyperparameters"))
        environment = _mapping(data["environment"], "environment")
        data["environment"] = {str(k): str(v) for k, v in environment.items()}
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        """The JSON dump this view was read from (``JobSpec.model_dump(mode="json")``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["hyperparameters"] = dict(self.hyperparameters)
        data["environment"] = dict(self.environment)
        data["inputs"] = {c.name: c.to_json() for c in self.inputs}
        data["metric_definitions"] = [_plain(m) for m in self.metric_definitions]
        data["checkpoint"] = None if self.checkpoint is None else _plain(self.checkpoint)
        data["stopping_condition"] = _plain(self.stopping_condition)
        data["retry_strategy"] = _plain(self.retry_strategy)
        data["chaos"] = None if self.chaos is None else self.chaos.to_json()
        data["distribution"] = self.distribution.to_json()
        profiler, board = self.profiler_config, self.tensorboard_output_config
        data["profiler_config"] = None if profiler is None else profiler.to_json()
        data["rules"] = [rule.to_json() for rule in self.rules]
        data["tensorboard_output_config"] = None if board is None else board.to_json()
        hook = self.debugger_hook_config
        data["debugger_hook_config"] = None if hook is None else hook.to_json()
        return data

    @property
    def profiling(self) -> ProfilerSpec | None:
        """The profiler settings when profiling is on (``profiler_config`` given and not
        disabled), else None."""
        config = self.profiler_config
        return None if config is None or config.disable_profiler else config

    @property
    def profiler_rules(self) -> tuple[RuleSpec, ...]:
        """The rules that read the profiler's data (``kind`` ``profiler``)."""
        return tuple(rule for rule in self.rules if rule.kind == "profiler")

    @property
    def debugger_rules(self) -> tuple[RuleSpec, ...]:
        """The built-in rules that read the saved tensors (``kind`` ``debugger``)."""
        return tuple(rule for rule in self.rules if rule.kind == "debugger")

    @property
    def custom_rules(self) -> tuple[RuleSpec, ...]:
        """The rules from the job's own source (``kind`` ``custom``: ``source`` and
        ``rule_to_invoke``), which read the saved tensors too."""
        return tuple(rule for rule in self.rules if rule.kind == "custom")

    @property
    def grace_seconds(self) -> float:
        """SIGTERM to SIGKILL delay when the job is stopped."""
        return float(self.stopping_condition.grace_period_in_seconds)

    @property
    def max_wait_seconds(self) -> float | None:
        """A spot job's limit from submission to its end (None: not a spot job)."""
        wait = self.stopping_condition.max_wait_time_in_seconds
        return float(wait) if self.use_spot_instances and wait is not None else None

    @property
    def checkpoint_uri(self) -> str | None:
        return None if self.checkpoint is None else self.checkpoint.uri

    @property
    def checkpoint_local_path(self) -> str:
        return DEFAULT_CHECKPOINT_PATH if self.checkpoint is None else self.checkpoint.local_path


def _plain(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}
