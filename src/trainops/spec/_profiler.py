"""Observation settings of a job: ``profiler_config``, ``rules`` and ``tensorboard_output_config``.

Names are the SageMaker Python SDK's: ``ProfilerConfig(s3_output_path,
system_monitor_interval_millis, framework_profile_params, disable_profiler)``,
``FrameworkProfile(local_path, file_max_size, ..., start_step, num_steps, start_unix_time,
duration)`` with its ``DetailedProfilingConfig``, ``DataloaderProfilingConfig`` and
``PythonProfilingConfig``, ``ProfilerRule.sagemaker(rule_configs.X(...))`` as ``{rule: X,
rule_parameters: {...}}``, and ``TensorBoardOutputConfig(s3_output_path,
container_local_output_path)``. ``s3_output_path`` takes any URI trainops stores to.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, computed_field, field_validator, model_validator

from trainops.spec._base import SpecModel
from trainops.spec._raw import uri_problem
from trainops.spec._rule_catalog import (
    CUSTOM,
    DEBUGGER,
    PROFILER,
    PROFILER_REPORT,
    check_rule_parameters,
    rule_definition,
    rule_name,
)

__all__ = [
    "DEFAULT_PROFILER_LOCAL_PATH",
    "DEFAULT_TENSORBOARD_LOCAL_PATH",
    "INTERVALS_MILLIS",
    "ActionSpecModel",
    "CProfileTimer",
    "DataloaderProfilingConfig",
    "DetailedProfilingConfig",
    "FrameworkProfile",
    "ProfilerConfig",
    "PythonProfiler",
    "PythonProfilingConfig",
    "RuleConfig",
    "TensorBoardOutputConfig",
    "check_rules",
]

INTERVALS_MILLIS = (100, 200, 500, 1000, 5000, 60000)
DEFAULT_PROFILER_LOCAL_PATH = "/opt/ml/output/profiler"
DEFAULT_TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"
MAX_RULES = 20
MAX_ACTIONS = 5
_RULE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}$")


def _opt_ml_path(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    parts = Path(value).parts
    if not value.startswith("/opt/ml/") or ".." in parts or len(parts) < 4:
        raise ValueError("must be a directory under /opt/ml/ (it is re-rooted in each host's tree)")
    return value.rstrip("/")


def _uri(value: str | None) -> str | None:
    if value is None:
        return None
    problem = uri_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


class _Window(SpecModel):
    """A profiling window: ``start_step`` + ``num_steps``, or ``start_unix_time`` + ``duration``
    (seconds); the two kinds exclude each other. Unset, the sub-config's defaults apply."""

    start_step: int | None = Field(default=None, ge=0)
    num_steps: int | None = Field(default=None, ge=1, le=1_000_000)
    start_unix_time: float | None = Field(default=None, ge=0)
    duration: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)

    @model_validator(mode="after")
    def _one_kind(self) -> _Window:
        by_step = self.start_step is not None or self.num_steps is not None
        by_time = self.start_unix_time is not None or self.duration is not None
        if by_step and by_time:
            raise ValueError(
                "give start_step/num_steps or start_unix_time/duration, not both (the SDK's "
                "rule: a window is a step range or a time range)"
            )
        return self

    @property
    def by_time(self) -> bool:
        return self.start_unix_time is not None or self.duration is not None


class DetailedProfilingConfig(_Window):
    """torch.profiler for the window: a Chrome/Perfetto trace per rank (default: step 5, 1 step)."""


class DataloaderProfilingConfig(_Window):
    """Per-batch fetch times and worker counts for the window (default: step 7, 1 step)."""


class PythonProfiler(StrEnum):
    CPROFILE = "cprofile"
    PYINSTRUMENT = "pyinstrument"


class CProfileTimer(StrEnum):
    TOTAL_TIME = "total_time"
    CPU_TIME = "cpu_time"
    OFF_CPU_TIME = "off_cpu_time"
    DEFAULT = "default"


class PythonProfilingConfig(_Window):
    """cProfile or pyinstrument for the window (default: step 9, 3 steps)."""

    python_profiler: PythonProfiler = PythonProfiler.CPROFILE
    cprofile_timer: CProfileTimer = CProfileTimer.TOTAL_TIME

    @field_validator("python_profiler", "cprofile_timer", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value


# The SDK's defaults for each sub-config's step window.
WINDOW_DEFAULTS = {
    "detailed_profiling_config": (5, 1),
    "dataloader_profiling_config": (7, 1),
    "python_profiling_config": (9, 3),
}


class FrameworkProfile(_Window):
    """Which framework profilers run, and when (SageMaker's ``FrameworkProfile``).

    With no sub-config given, all three run: in the window given here, else each in its own
    default window. A sub-config without a window of its own gets its default window."""

    local_path: str = DEFAULT_PROFILER_LOCAL_PATH
    file_max_size: int = Field(default=10 * 1024 * 1024, ge=1024, le=1 << 30)
    file_close_interval: float = Field(default=60, gt=0, le=3600)
    file_open_fail_threshold: int = Field(default=50, ge=1)
    detailed_profiling_config: DetailedProfilingConfig | None = None
    dataloader_profiling_config: DataloaderProfilingConfig | None = None
    python_profiling_config: PythonProfilingConfig | None = None

    @field_validator("local_path")
    @classmethod
    def _local_path(cls, value: str) -> str:
        return _opt_ml_path(value)

    @model_validator(mode="after")
    def _fill(self) -> FrameworkProfile:
        subs = {name: getattr(self, name) for name in WINDOW_DEFAULTS}
        window = {
            key: getattr(self, key)
            for key in ("start_step", "num_steps", "start_unix_time", "duration")
            if getattr(self, key) is not None
        }
        if all(sub is None for sub in subs.values()):
            models = {
                "detailed_profiling_config": DetailedProfilingConfig,
                "dataloader_profiling_config": DataloaderProfilingConfig,
                "python_profiling_config": PythonProfilingConfig,
            }
            subs = {name: model(**window) for name, model in models.items()}
        for name, sub in subs.items():
            if sub is not None and not sub.by_time and sub.start_step is None:
                start, count = WINDOW_DEFAULTS[name]
                extra = sub.model_dump(exclude={"start_step", "num_steps"})
                sub = type(sub)(start_step=start, num_steps=sub.num_steps or count, **extra)
            elif sub is not None and not sub.by_time and sub.num_steps is None:
                extra = sub.model_dump(exclude={"num_steps"})
                sub = type(sub)(num_steps=WINDOW_DEFAULTS[name][1], **extra)
            object.__setattr__(self, name, sub)
        return self


class ProfilerConfig(SpecModel):
    """System monitoring and framework profiling of a job (SageMaker's ``ProfilerConfig``)."""

    s3_output_path: str | None = Field(
        default=None,
        description="where profiler data goes; default <output prefix>/profiler-output",
    )
    system_monitor_interval_millis: int = Field(default=500)
    framework_profile_params: FrameworkProfile | None = None
    disable_profiler: bool = False

    @field_validator("s3_output_path")
    @classmethod
    def _s3_output_path(cls, value: str | None) -> str | None:
        return _uri(value)

    @field_validator("system_monitor_interval_millis")
    @classmethod
    def _interval(cls, value: int) -> int:
        if value not in INTERVALS_MILLIS:
            allowed = ", ".join(str(v) for v in INTERVALS_MILLIS)
            raise ValueError(f"{value} is not an interval SageMaker offers; use one of {allowed}")
        return value


class ActionKind(StrEnum):
    """The kinds of action a rule may take; each has a runner in ``trainops.actions.ACTIONS``
    (tests/actions/test_action_conformance.py checks that the two agree)."""

    STOP_TRAINING = "stop_training"
    WEBHOOK = "webhook"
    COMMAND = "command"


_ACTION_ALIASES = {"stoptraining": "stop_training", "stop": "stop_training"}
# ``{kind: value}`` shorthand: the field the value fills (``{webhook: URL}``, ``{command: argv}``).
_SHORTHAND_FIELD: dict[str, str] = {ActionKind.WEBHOOK: "url", ActionKind.COMMAND: "argv"}


class ActionSpecModel(SpecModel):
    """What happens when a rule finds an issue (besides recording it): ``stop_training``
    (SDK ``rule_configs.StopTraining()``), ``webhook`` (POST the finding as JSON to ``url``) or
    ``command`` (run ``argv``, no shell, with the finding as JSON on its standard input)."""

    type: ActionKind
    url: str | None = Field(default=None, max_length=2048)
    argv: list[str] | None = Field(default=None, min_length=1, max_length=64)
    timeout_seconds: float = Field(default=10, gt=0, le=300)

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> Any:
        if isinstance(value, str):
            key = value.replace("-", "_").lower()
            return _ACTION_ALIASES.get(key.replace("_", ""), key)
        return value

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """``stop_training`` / ``StopTraining`` alone, or ``{webhook: URL}`` /
        ``{command: [argv]}`` / ``{stop_training: {}}``."""
        if isinstance(value, str):
            return {"type": value}
        if isinstance(value, dict) and "type" not in value and len(value) == 1:
            ((key, item),) = value.items()
            kind = _ACTION_ALIASES.get(key.replace("_", "").lower(), key)
            if kind in _SHORTHAND_FIELD:
                return {"type": kind, _SHORTHAND_FIELD[kind]: item}
            if kind == ActionKind.STOP_TRAINING and item in (None, {}, True):
                return {"type": kind}
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.match(r"^https?://[^\s/]+", value) or any(ord(c) < 33 for c in value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL")
        return value

    @field_validator("argv")
    @classmethod
    def _argv(cls, value: list[str] | None) -> list[str] | None:
        for word in value or []:
            if "\x00" in word or len(word) > 4096:
                raise ValueError("each argument must be under 4096 characters, without NUL")
        return value

    @model_validator(mode="after")
    def _needs(self) -> ActionSpecModel:
        if self.type is ActionKind.WEBHOOK and self.url is None:
            raise ValueError("a webhook action needs url")
        if self.type is ActionKind.COMMAND and not self.argv:
            raise ValueError("a command action needs argv (a list: program, then arguments)")
        if self.type is not ActionKind.WEBHOOK and self.url is not None:
            raise ValueError(f"url belongs to a webhook action, not {self.type.value}")
        if self.type is not ActionKind.COMMAND and self.argv is not None:
            raise ValueError(f"argv belongs to a command action, not {self.type.value}")
        return self


class RuleConfig(SpecModel):
    """One rule to evaluate while the job runs (``ProfilerRule.sagemaker(rule_configs.X())``
    or ``Rule.sagemaker(rule_configs.x())``): the built-in ``rule`` (a debugger rule may be
    named by its SDK function, ``vanishing_gradient``), an optional ``name`` (default: the
    rule's), its parameters, and the actions to take when it finds an issue.

    A custom rule (SageMaker's ``Rule.custom``) names a class instead: ``source`` (a ``.py``
    file in the job's ``source_dir``) and ``rule_to_invoke`` (the class, an smdebug-style rule
    with ``invoke_at_step``), a ``name``, and ``rule_parameters`` passed to it as strings.
    ``kind`` (not an input) says whether it is a ``profiler``, ``debugger`` or ``custom``
    rule."""

    rule: str | None = None
    source: str | None = Field(default=None, max_length=1024)
    rule_to_invoke: str | None = None
    name: str | None = None
    rule_parameters: dict[str, Any] = Field(default_factory=dict)
    actions: list[ActionSpecModel] = Field(default_factory=list, max_length=MAX_ACTIONS)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """A rule's name alone; ``kind`` (as a stored spec's dump has it) is dropped once it
        agrees with the rule's."""
        if isinstance(value, str):
            return {"rule": value}
        if _dumped_custom(value):
            value = {k: v for k, v in value.items() if k != "rule"}
        if isinstance(value, dict) and "kind" in value:
            value = dict(value)
            kind = value.pop("kind")
            try:
                actual = (
                    CUSTOM
                    if value.get("source") is not None
                    else rule_definition(str(value.get("rule"))).kind
                )
            except KeyError:
                return value  # the rule's own check says what is wrong
            if kind != actual:
                raise ValueError(f"kind: {value.get('rule')} is a {actual} rule, not {kind!r}")
        return value

    @field_validator("rule")
    @classmethod
    def _rule(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return rule_name(value)
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None

    @field_validator("source")
    @classmethod
    def _source(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = Path(value)
        if "\x00" in value or path.is_absolute() or ".." in path.parts or path.suffix != ".py":
            raise ValueError(
                "must be a .py file's path relative to source_dir, without '..' (the custom "
                "rule's code, packed with the job's source)"
            )
        return value

    @field_validator("rule_to_invoke")
    @classmethod
    def _class_name(cls, value: str | None) -> str | None:
        if value is not None and not (
            value.isidentifier() and value.isascii() and len(value) <= 128
        ):
            raise ValueError(f"must be a Python class name, not {value[:64]!r}")
        return value

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kind(self) -> str:
        """``profiler`` or ``debugger`` (the catalog's word for the rule), or ``custom``."""
        if self.source is not None:
            return CUSTOM
        return rule_definition(str(self.rule)).kind

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _RULE_NAME.match(value):
            raise ValueError(
                "must be 1-63 letters, digits or hyphens, starting with one of the first two"
            )
        return value

    @model_validator(mode="after")
    def _parameters(self) -> RuleConfig:
        if self.source is not None or self.rule_to_invoke is not None:
            return self._custom()
        if self.rule is None:
            raise ValueError(
                "rule: give a built-in rule, or source and rule_to_invoke for a custom rule"
            )
        try:
            resolved = check_rule_parameters(self.rule, self.rule_parameters)
        except ValueError as exc:
            raise ValueError(f"rule_parameters: {exc}") from None
        object.__setattr__(self, "rule_parameters", resolved)
        if self.name is None:
            object.__setattr__(self, "name", self.rule)
        return self

    def _custom(self) -> RuleConfig:
        if self.source is None or self.rule_to_invoke is None:
            raise ValueError("a custom rule needs both source and rule_to_invoke")
        if self.rule is not None and self.rule != self.rule_to_invoke:
            raise ValueError("a custom rule is named by rule_to_invoke; leave rule out")
        if self.name is None:
            raise ValueError("a custom rule needs a name (as Rule.custom does)")
        try:
            parameters = custom_rule_parameters(self.rule_parameters)
        except ValueError as exc:
            raise ValueError(f"rule_parameters: {exc}") from None
        object.__setattr__(self, "rule", self.rule_to_invoke)
        object.__setattr__(self, "rule_parameters", parameters)
        return self


MAX_CUSTOM_PARAMETERS = 100  # SageMaker's RuleParameters limit


def _dumped_custom(value: Any) -> bool:
    """A stored dump of a custom rule (its ``rule`` is its ``rule_to_invoke``)."""
    return (
        isinstance(value, dict)
        and value.get("source") is not None
        and value.get("rule") is not None
        and value.get("rule") == value.get("rule_to_invoke")
    )


def custom_rule_parameters(given: dict[str, Any]) -> dict[str, str]:
    """A custom rule's parameters as the strings its constructor gets (SageMaker passes
    strings): names are Python identifiers, values text without control characters."""
    if len(given) > MAX_CUSTOM_PARAMETERS:
        raise ValueError(f"{len(given)} parameters; at most {MAX_CUSTOM_PARAMETERS}")
    found: dict[str, str] = {}
    for key, value in given.items():
        if not (key.isidentifier() and key.isascii() and len(key) <= 128):
            raise ValueError(f"{key[:64]!r} is not a parameter name (a Python identifier)")
        if key in ("base_trial", "other_trials"):
            raise ValueError(f"{key!r} is given by trainops, not a parameter")
        if isinstance(value, bool):
            text = "True" if value else "False"
        elif isinstance(value, int | float | str):
            text = str(value)
        else:
            raise ValueError(f"{key}: must be a string, number or boolean, not {value!r}")
        if len(text) > 1024 or any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise ValueError(f"{key}: at most 1024 characters, without control characters")
        found[key] = text
    return found


class TensorBoardOutputConfig(SpecModel):
    """Where TensorBoard event files are written on each host and synced to while the job runs
    (SageMaker's ``TensorBoardOutputConfig``)."""

    s3_output_path: str | None = Field(
        default=None, description="default: <output prefix>/tensorboard"
    )
    container_local_output_path: str = DEFAULT_TENSORBOARD_LOCAL_PATH

    @field_validator("s3_output_path")
    @classmethod
    def _s3_output_path(cls, value: str | None) -> str | None:
        return _uri(value)

    @field_validator("container_local_output_path")
    @classmethod
    def _local(cls, value: str) -> str:
        return _opt_ml_path(value)


def check_rules(rules: list[RuleConfig]) -> list[RuleConfig]:
    """At most ``MAX_RULES`` of each kind (SageMaker's 20 ``Rule`` and 20 ``ProfilerRule``),
    distinct names, and ProfilerReport at most once."""
    for kind, kinds in ((PROFILER, {PROFILER}), (DEBUGGER, {DEBUGGER, CUSTOM})):
        count = sum(rule.kind in kinds for rule in rules)
        if count > MAX_RULES:
            raise ValueError(f"{count} {kind} rules (custom ones included); at most {MAX_RULES}")
    names = [rule.name for rule in rules]
    dupes = sorted({n for n in names if n is not None and names.count(n) > 1})
    if dupes:
        raise ValueError(f"rule names must be unique; repeated: {', '.join(dupes)} (give name:)")
    if sum(rule.rule == PROFILER_REPORT for rule in rules) > 1:
        raise ValueError("ProfilerReport may be given once")
    return rules
