"""The typed view of a job's observation settings: profiler, rules and TensorBoard output.

Strict like the rest of :class:`~trainops.protocol.SubmittedJob`: every field of the stored
dump is read, none is defaulted here (the spec models hold the defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "DEBUG_OUTPUT",
    "ActionSpec",
    "CollectionSpec",
    "DebugHookSpec",
    "FrameworkProfileSpec",
    "ProfilerSpec",
    "ProfilingWindow",
    "RuleSpec",
    "TensorBoardSpec",
]

DEBUG_OUTPUT = "debug-output"


def _fields_of(cls: type, raw: Any, where: str) -> dict[str, Any]:
    from trainops.protocol._job import _fields

    return _fields(cls, raw, where)


@dataclass(frozen=True, slots=True)
class ProfilingWindow:
    """A step range (``start_step`` + ``num_steps``) or a time range (``start_unix_time`` +
    ``duration`` seconds; a missing start means the job's start). ``python_profiler`` and
    ``cprofile_timer`` are set for the Python profiler's window only."""

    start_step: int | None
    num_steps: int | None
    start_unix_time: float | None
    duration: float | None
    python_profiler: str | None = None
    cprofile_timer: str | None = None

    @property
    def by_time(self) -> bool:
        return self.start_unix_time is not None or self.duration is not None

    def covers_step(self, step: int) -> bool:
        if self.by_time or self.start_step is None:
            return False
        return self.start_step <= step < self.start_step + (self.num_steps or 1)

    def covers_time(self, now: float, job_start: float) -> bool:
        if not self.by_time:
            return False
        start = self.start_unix_time if self.start_unix_time is not None else job_start
        end = start + (self.duration if self.duration is not None else 60.0)
        return start <= now < end

    @classmethod
    def from_json(cls, raw: Any, where: str, python: bool = False) -> ProfilingWindow | None:
        if raw is None:
            return None
        if python:
            return cls(**_fields_of(cls, raw, where))
        names = {"start_step", "num_steps", "start_unix_time", "duration"}
        data = _fields_of(_StepWindow, raw, where)
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.python_profiler is None:
            data.pop("python_profiler")
            data.pop("cprofile_timer")
        return data


@dataclass(frozen=True, slots=True)
class _StepWindow:
    start_step: int | None
    num_steps: int | None
    start_unix_time: float | None
    duration: float | None


@dataclass(frozen=True, slots=True)
class FrameworkProfileSpec:
    """Which framework profilers run and when (each window None: that profiler is off)."""

    local_path: str
    file_max_size: int
    file_close_interval: float
    file_open_fail_threshold: int
    start_step: int | None
    num_steps: int | None
    start_unix_time: float | None
    duration: float | None
    detailed_profiling_config: ProfilingWindow | None
    dataloader_profiling_config: ProfilingWindow | None
    python_profiling_config: ProfilingWindow | None

    @classmethod
    def from_json(cls, raw: Any, where: str) -> FrameworkProfileSpec:
        data = _fields_of(cls, raw, where)
        for name in ("detailed_profiling_config", "dataloader_profiling_config"):
            data[name] = ProfilingWindow.from_json(data[name], f"{where}.{name}")
        name = "python_profiling_config"
        data[name] = ProfilingWindow.from_json(data[name], f"{where}.{name}", python=True)
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for name in ("detailed_profiling_config", "dataloader_profiling_config"):
            window = data[name]
            data[name] = None if window is None else window.to_json()
        window = self.python_profiling_config
        data["python_profiling_config"] = None if window is None else asdict(window)
        return data


@dataclass(frozen=True, slots=True)
class ProfilerSpec:
    """System monitoring and framework profiling (``disable_profiler``: neither runs)."""

    s3_output_path: str | None
    system_monitor_interval_millis: int
    framework_profile_params: FrameworkProfileSpec | None
    disable_profiler: bool

    @classmethod
    def from_json(cls, raw: Any, where: str = "profiler_config") -> ProfilerSpec:
        data = _fields_of(cls, raw, where)
        params = data["framework_profile_params"]
        if params is not None:
            data["framework_profile_params"] = FrameworkProfileSpec.from_json(
                params, f"{where}.framework_profile_params"
            )
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        params = self.framework_profile_params
        return {
            "s3_output_path": self.s3_output_path,
            "system_monitor_interval_millis": self.system_monitor_interval_millis,
            "framework_profile_params": None if params is None else params.to_json(),
            "disable_profiler": self.disable_profiler,
        }


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """``stop_training``, ``webhook`` (``url``) or ``command`` (``argv``)."""

    type: str
    url: str | None
    argv: tuple[str, ...] | None
    timeout_seconds: float

    @classmethod
    def from_json(cls, raw: Any, where: str) -> ActionSpec:
        data = _fields_of(cls, raw, where)
        if data["argv"] is not None:
            data["argv"] = tuple(str(word) for word in data["argv"])
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "url": self.url,
            "argv": None if self.argv is None else list(self.argv),
            "timeout_seconds": self.timeout_seconds,
        }


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A rule to evaluate: its built-in ``rule``, ``name``, resolved parameters, actions and
    ``kind`` (``profiler`` or ``debugger``)."""

    rule: str
    name: str
    rule_parameters: Mapping[str, Any]
    actions: tuple[ActionSpec, ...]
    kind: str = "profiler"
    #: A custom rule's (``kind`` ``custom``): its file in the job's source, and its class.
    source: str | None = None
    rule_to_invoke: str | None = None

    @classmethod
    def from_json(cls, raw: Any, where: str) -> RuleSpec:
        if isinstance(raw, Mapping):  # stored before debugger (and custom) rules existed
            raw = {"kind": "profiler", "source": None, "rule_to_invoke": None, **raw}
        data = _fields_of(cls, raw, where)
        data["rule_parameters"] = dict(data["rule_parameters"])
        data["actions"] = tuple(
            ActionSpec.from_json(a, f"{where}.actions[{i}]") for i, a in enumerate(data["actions"])
        )
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "rule_parameters": dict(self.rule_parameters),
            "actions": [a.to_json() for a in self.actions],
            "kind": self.kind,
            "source": self.source,
            "rule_to_invoke": self.rule_to_invoke,
        }


@dataclass(frozen=True, slots=True)
class TensorBoardSpec:
    """Where event files are written on each host, and where they are synced."""

    s3_output_path: str | None
    container_local_output_path: str

    @classmethod
    def from_json(cls, raw: Any, where: str = "tensorboard_output_config") -> TensorBoardSpec:
        return cls(**_fields_of(cls, raw, where))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CollectionSpec:
    """One collection the debugger hook saves, with its parameters (strings, as the API's)."""

    name: str
    parameters: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class DebugHookSpec:
    """The job's debugger hook: where each host saves tensors and where they are synced, the
    hook's parameters and its collections (rule collections merged in)."""

    s3_output_path: str | None
    container_local_output_path: str
    hook_parameters: Mapping[str, str]
    collection_configs: tuple[CollectionSpec, ...]

    @classmethod
    def from_json(cls, raw: Any, where: str = "debugger_hook_config") -> DebugHookSpec:
        data = _fields_of(cls, raw, where)
        data["hook_parameters"] = {
            str(k): str(v) for k, v in _mapping_of(data["hook_parameters"], where).items()
        }
        if not isinstance(data["collection_configs"], list | tuple):
            from trainops.protocol._job import SpecViewError

            raise SpecViewError(f"{where}.collection_configs: expected a list")
        collections = []
        for i, item in enumerate(data["collection_configs"]):
            fields = _fields_of(CollectionSpec, item, f"{where}.collection_configs[{i}]")
            parameters = _mapping_of(fields["parameters"], where)
            collections.append(
                CollectionSpec(str(fields["name"]), {str(k): str(v) for k, v in parameters.items()})
            )
        data["collection_configs"] = tuple(collections)
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return {
            "s3_output_path": self.s3_output_path,
            "container_local_output_path": self.container_local_output_path,
            "hook_parameters": dict(self.hook_parameters),
            "collection_configs": [
                {"name": c.name, "parameters": dict(c.parameters)} for c in self.collection_configs
            ],
        }

    def output_prefix(self, job_output_prefix: str, job_name: str) -> str:
        """Where the job's tensors go, as SageMaker places them: ``<s3_output_path>/<job>/
        debug-output``, by default ``<output_path>/<job>/debug-output`` (``job_output_prefix``
        is ``<output_path>/<job>``)."""
        if self.s3_output_path:
            return f"{self.s3_output_path.rstrip('/')}/{job_name}/{DEBUG_OUTPUT}"
        return f"{job_output_prefix.rstrip('/')}/{DEBUG_OUTPUT}"

    def api_shape(self, local_path: str, s3_output_path: str) -> dict[str, Any]:
        """SageMaker's ``DebugHookConfig`` (``debughookconfig.json``'s and DescribeTrainingJob's
        shape), with the resolved ``LocalPath`` and ``S3OutputPath``."""
        return {
            "LocalPath": local_path,
            "S3OutputPath": s3_output_path,
            "HookParameters": dict(self.hook_parameters),
            "CollectionConfigurations": [
                {"CollectionName": c.name, "CollectionParameters": dict(c.parameters)}
                for c in self.collection_configs
            ],
        }


def _mapping_of(raw: Any, where: str) -> Mapping[str, Any]:
    from trainops.protocol._job import _mapping

    return _mapping(raw, where)
