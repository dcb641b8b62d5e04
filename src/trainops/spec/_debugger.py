"""``debugger_hook_config``: what the job's debugger hook saves, and where (SageMaker's names).

The SDK's ``DebuggerHookConfig(s3_output_path, container_local_output_path, hook_parameters,
collection_configs)`` with ``CollectionConfig(name, parameters)``; the API's
``DebugHookConfig{S3OutputPath, LocalPath, HookParameters, CollectionConfigurations}`` is what
each host's ``input/config/debughookconfig.json`` holds. Parameters are strings, as the API has
them (``save_interval: 100`` becomes ``"100"``, ``true`` becomes ``"true"``); each is checked
the way smdebug parses it (reference/sagemaker.md §5.1-5.3):

- save configuration, optionally per mode: ``save_interval``, ``save_steps`` (comma list),
  ``start_step``, ``end_step``, and ``train.``/``eval.``/``predict.``/``global.`` forms;
- ``include_regex`` (comma list of regular expressions), ``reductions`` (comma list of
  ``min, max, mean, std, variance, sum, prod, l1_norm, l2_norm``, each also ``abs_``),
  ``save_raw_tensor``, ``save_shape``;
- the hook's own: ``save_all``, ``dry_run``, ``include_workers`` (``one``/``all``),
  ``export_tensorboard``, ``tensorboard_dir`` (under /opt/ml); a collection's own:
  ``save_histogram``.

At most 20 hook parameters and 20 collections (the API's limits).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from trainops._regex import MAX_PATTERN_CHARS, MAX_PATTERNS, check_untrusted_regex
from trainops.spec._base import FieldValueError, SpecModel
from trainops.spec._debugger_catalog import COLLECTION_NAME, MAX_TEXT
from trainops.spec._profiler import _opt_ml_path, _uri
from trainops.spec._rule_definition import RuleDefinition

__all__ = [
    "DEFAULT_TENSORS_LOCAL_PATH",
    "MAX_COLLECTIONS",
    "MAX_HOOK_PARAMETERS",
    "REDUCTIONS",
    "CollectionConfig",
    "DebuggerHookConfig",
    "with_rule_collections",
]

DEFAULT_TENSORS_LOCAL_PATH = "/opt/ml/output/tensors"
MAX_HOOK_PARAMETERS = 20
MAX_COLLECTIONS = 20
MAX_SAVE_STEPS = 1000
MAX_STEP = 2**53
REDUCTIONS = tuple(
    f"{prefix}{name}"
    for prefix in ("", "abs_")
    for name in ("min", "max", "mean", "std", "variance", "sum", "prod", "l1_norm", "l2_norm")
)
_MODE_PREFIXES = ("train.", "eval.", "predict.", "global.")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _flag(value: str) -> str:
    word = value.strip().lower()
    if word in _TRUE:
        return "true"
    if word in _FALSE:
        return "false"
    raise ValueError(f"must be true or false, not {value!r}")


def _step(value: str, *, least: int = 0) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"must be a whole number, not {value!r}") from None
    if number < least or number > MAX_STEP:
        raise ValueError(f"must be a whole number of {least} or more, not {value!r}")
    return number


def _interval(value: str) -> str:
    return str(_step(value, least=1))


def _start_or_end(value: str) -> str:
    return str(_step(value))


def _steps(value: str) -> str:
    items = [item.strip() for item in value.split(",")]
    if len(items) > MAX_SAVE_STEPS:
        raise ValueError(f"{len(items)} steps; at most {MAX_SAVE_STEPS}")
    return ",".join(str(_step(item)) for item in items)


def _regexes(value: str) -> str:
    """Each pattern must be one the debugger's trial reader accepts from the job's collections
    file (the control plane's rules read it): refused there, the rules would see nothing."""
    items = value.split(",")
    if len(items) > MAX_PATTERNS:
        raise ValueError(f"{len(items)} patterns, at most {MAX_PATTERNS}")
    for item in items:
        if len(item.strip()) > MAX_PATTERN_CHARS:
            raise ValueError(
                f"a pattern of {len(item.strip())} characters, at most {MAX_PATTERN_CHARS}"
            )
        check_untrusted_regex(item.strip())
    return value


def _reductions(value: str) -> str:
    items = [item.strip() for item in value.split(",") if item.strip()]
    for item in items:
        if item not in REDUCTIONS:
            raise ValueError(
                f"{item!r} is not a reduction; use {', '.join(REDUCTIONS[:9])} or abs_<that>"
            )
    return ",".join(items)


def _workers(value: str) -> str:
    word = value.strip().lower()
    if word not in ("one", "all"):
        raise ValueError(f"must be one or all, not {value!r}")
    return word


def _local_dir(value: str) -> str:
    return _opt_ml_path(value)


_SAVE_KEYS: dict[str, Callable[[str], str]] = {
    "save_interval": _interval,
    "save_steps": _steps,
    "start_step": _start_or_end,
    "end_step": _start_or_end,
}
_TENSOR_KEYS: dict[str, Callable[[str], str]] = {
    "include_regex": _regexes,
    "reductions": _reductions,
    "save_raw_tensor": _flag,
    "save_shape": _flag,
}
HOOK_KEYS: dict[str, Callable[[str], str]] = {
    **_TENSOR_KEYS,
    "save_all": _flag,
    "dry_run": _flag,
    "include_workers": _workers,
    "export_tensorboard": _flag,
    "tensorboard_dir": _local_dir,
}
COLLECTION_KEYS: dict[str, Callable[[str], str]] = {**_TENSOR_KEYS, "save_histogram": _flag}


def _as_text(value: Any) -> str:
    """A parameter's value as the API's string (YAML numbers and booleans allowed)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list | tuple) and all(isinstance(v, str | int) for v in value):
        return ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise ValueError(f"must be a string (or number, boolean, list), not {value!r}")
    if len(value) > MAX_TEXT or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"must be at most {MAX_TEXT} characters, no control characters")
    return value


def _checked(
    parameters: Mapping[str, Any], own: Mapping[str, Callable[[str], str]], what: str
) -> dict[str, str]:
    if len(parameters) > MAX_HOOK_PARAMETERS:
        raise ValueError(f"{len(parameters)} {what}; at most {MAX_HOOK_PARAMETERS}")
    checked: dict[str, str] = {}
    for key, value in parameters.items():
        prefix = next((p for p in _MODE_PREFIXES if key.startswith(p)), "")
        check = _SAVE_KEYS.get(key[len(prefix) :]) or (own.get(key) if not prefix else None)
        if check is None:
            known = sorted({*own, *_SAVE_KEYS})
            raise FieldValueError(
                key,
                f"{key!r} is not one of the {what} ({', '.join(known)}, and "
                "train./eval./predict./global. forms of the save keys)",
            )
        try:
            checked[key] = check(_as_text(value))
        except ValueError as exc:
            raise FieldValueError(key, f"{key}: {exc}") from None
    return checked


class CollectionConfig(SpecModel):
    """One collection to save and how (the SDK's ``CollectionConfig(name, parameters)``)."""

    name: str
    parameters: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not COLLECTION_NAME.match(value):
            raise ValueError(
                f"{value[:64]!r} is not a collection name (1-128 of A-Z a-z 0-9 _ . -, not "
                "starting with . or -)"
            )
        return value

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict[str, Any]) -> dict[str, str]:
        return _checked(value, COLLECTION_KEYS, "collection parameters")


class DebuggerHookConfig(SpecModel):
    """The job's debugger hook (SageMaker's ``DebuggerHookConfig``): each host saves tensors
    under ``container_local_output_path`` (re-rooted in the host's tree), synced to
    ``s3_output_path`` (default ``<output_path>/<job>/debug-output``) while the job runs."""

    s3_output_path: str | None = Field(
        default=None, description="default: <output prefix>/debug-output"
    )
    container_local_output_path: str = DEFAULT_TENSORS_LOCAL_PATH
    hook_parameters: dict[str, Any] = Field(default_factory=dict)
    collection_configs: list[CollectionConfig] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _collection_shorthand(cls, value: Any) -> Any:
        """``collection_configs`` may list bare names, or be a ``{name: parameters}`` map."""
        if not isinstance(value, dict):
            return value
        configs = value.get("collection_configs")
        if isinstance(configs, dict):
            configs = [{"name": k, "parameters": v or {}} for k, v in configs.items()]
        if isinstance(configs, list):
            configs = [{"name": c} if isinstance(c, str) else c for c in configs]
            value = {**value, "collection_configs": configs}
        return value

    @field_validator("s3_output_path")
    @classmethod
    def _s3_output_path(cls, value: str | None) -> str | None:
        return _uri(value)

    @field_validator("container_local_output_path")
    @classmethod
    def _local(cls, value: str) -> str:
        return _opt_ml_path(value)

    @field_validator("hook_parameters")
    @classmethod
    def _hook_parameters(cls, value: dict[str, Any]) -> dict[str, str]:
        return _checked(value, HOOK_KEYS, "hook parameters")

    @field_validator("collection_configs")
    @classmethod
    def _collections(cls, value: list[CollectionConfig]) -> list[CollectionConfig]:
        if len(value) > MAX_COLLECTIONS:
            raise ValueError(f"{len(value)} collections; at most {MAX_COLLECTIONS}")
        names = [c.name for c in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"collection names must be unique; repeated: {', '.join(dupes)}")
        return value


def with_rule_collections(
    config: DebuggerHookConfig | None, rules: list[RuleDefinition], *, needed: bool = False
) -> DebuggerHookConfig | None:
    """``config`` with the collections ``rules`` save by default added, as the SDK does: a
    collection the job configures itself keeps its own parameters; debugger rules (or custom
    rules: ``needed``) without a hook configuration get one at the defaults. None when there
    is neither."""
    wanted = [(name, params) for rule in rules for name, params in rule.collections]
    if config is None and not rules and not needed:
        return None
    config = config or DebuggerHookConfig()
    have = {c.name for c in config.collection_configs}
    added = []
    for name, params in wanted:
        if name not in have:
            have.add(name)
            added.append(CollectionConfig(name=name, parameters=dict(params)))
    if not added:
        return config
    collections = [*added, *config.collection_configs]
    if len(collections) > MAX_COLLECTIONS:
        raise ValueError(
            f"{len(collections)} collections with those the debugger rules save; at most "
            f"{MAX_COLLECTIONS}"
        )
    return config.model_copy(update={"collection_configs": collections})
