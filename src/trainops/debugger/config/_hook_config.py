"""``debughookconfig.json``: the hook's configuration as SageMaker writes it into the host's tree.

The shape (SageMaker's ``DebugHookConfig``; every parameter value is a string in the API)::

    {"LocalPath": "/opt/ml/output/tensors", "S3OutputPath": "s3://.../debug-output",
     "HookParameters": {"save_interval": "100", "train.save_interval": "10", ...},
     "CollectionConfigurations": [{"CollectionName": "weights",
                                   "CollectionParameters": {"save_interval": "50"}}]}

:func:`load_hook_config` reads and checks it (a clear one-line error naming the key);
:class:`HookConfig` turns it into the hook's :class:`SaveConfig`, :class:`ReductionConfig` and
collections as smdebug's ``json_config`` does (a collection's save settings start from the
hook's, then its own keys, ``<mode>.`` keys last).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.debugger.config._collection import Collection
from trainops.debugger.config._reduction_config import ReductionConfig, parse_bool
from trainops.debugger.config._save_config import SaveConfig, SaveConfigMode
from trainops.debugger.exceptions import DebugConfigError
from trainops.debugger.modes import ModeKeys

__all__ = [
    "CONFIG_FILE_ENV",
    "DEFAULT_CONFIG_FILE",
    "DEFAULT_LOCAL_PATH",
    "CollectionConfiguration",
    "HookConfig",
    "load_hook_config",
]

CONFIG_FILE_ENV = "SMDEBUG_CONFIG_FILE_PATH"
DEFAULT_CONFIG_FILE = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensors"
_MAX_FILE_BYTES = 1 << 20
_MAX_ENTRIES = 100
_MAX_VALUE = 4096
_SAVE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
_MODE_PREFIX = {mode: f"{mode.name.lower()}." for mode in ModeKeys}


@dataclass(frozen=True)
class CollectionConfiguration:
    """One ``CollectionConfigurations`` entry."""

    name: str
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HookConfig:
    """The parsed ``debughookconfig.json``."""

    local_path: str = DEFAULT_LOCAL_PATH
    s3_output_path: str | None = None
    hook_parameters: dict[str, str] = field(default_factory=dict)
    collection_configurations: tuple[CollectionConfiguration, ...] = ()

    def to_json(self) -> str:
        data: dict[str, Any] = {"LocalPath": self.local_path}
        if self.s3_output_path is not None:
            data["S3OutputPath"] = self.s3_output_path
        data["HookParameters"] = dict(self.hook_parameters)
        data["CollectionConfigurations"] = [
            {"CollectionName": c.name, "CollectionParameters": dict(c.parameters)}
            for c in self.collection_configurations
        ]
        return json.dumps(data, indent=2, sort_keys=False)

    @classmethod
    def from_dict(cls, data: object, *, source: str = "debughookconfig.json") -> HookConfig:
        """Check ``data`` (the decoded JSON) and build the config; errors name ``source``."""
        try:
            return _parse(data)
        except (DebugConfigError, ValueError) as err:
            raise DebugConfigError(f"{source}: {err}") from None

    def save_config(self) -> SaveConfig:
        """The hook's save schedule per mode from ``HookParameters``."""
        return SaveConfig(mode_save_configs=_mode_configs(self.hook_parameters, {}))

    def reduction_config(self) -> ReductionConfig | None:
        """The hook's reductions, when ``HookParameters`` names any (or ``save_raw_tensor``)."""
        params = self.hook_parameters
        if "reductions" not in params and "save_raw_tensor" not in params:
            return None
        return ReductionConfig.from_dict(params)

    def include_regex(self) -> list[str]:
        return _split(self.hook_parameters.get("include_regex", ""))

    def include_workers(self) -> str:
        return self.hook_parameters.get("include_workers", "one")

    def save_all(self) -> bool:
        return parse_bool("save_all", self.hook_parameters.get("save_all", "false"))

    def dry_run(self) -> bool:
        return parse_bool("dry_run", self.hook_parameters.get("dry_run", "false"))

    def export_tensorboard(self) -> bool | None:
        """``export_tensorboard`` from ``HookParameters``; None when not given."""
        value = self.hook_parameters.get("export_tensorboard")
        return None if value is None else parse_bool("export_tensorboard", value)

    def tensorboard_dir(self) -> str | None:
        return self.hook_parameters.get("tensorboard_dir") or None

    def collections(self) -> list[Collection]:
        """Each configured collection with its own save, reduction and histogram settings."""
        base = {mode: _save_dict(self.hook_parameters, mode) for mode in ModeKeys}
        return [_collection(entry, base) for entry in self.collection_configurations]

    def include_collections(self) -> list[str]:
        return [entry.name for entry in self.collection_configurations]


def load_hook_config(path: str | os.PathLike[str] | None = None) -> HookConfig:
    """Read ``path`` (default ``$SMDEBUG_CONFIG_FILE_PATH``, else SageMaker's path)."""
    where = Path(path or os.environ.get(CONFIG_FILE_ENV) or DEFAULT_CONFIG_FILE)
    try:
        with open(where, "rb") as stream:
            raw = stream.read(_MAX_FILE_BYTES + 1)
    except OSError as err:
        raise DebugConfigError(f"{where}: cannot read the hook config ({err.strerror})") from None
    if len(raw) > _MAX_FILE_BYTES:
        raise DebugConfigError(f"{where}: larger than {_MAX_FILE_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise DebugConfigError(f"{where}: not valid JSON ({err})") from None
    return HookConfig.from_dict(data, source=str(where))


def _parse(data: object) -> HookConfig:
    if not isinstance(data, Mapping):
        raise DebugConfigError("the hook config must be a JSON object")
    local = _text(data, "LocalPath", DEFAULT_LOCAL_PATH)
    s3 = data.get("S3OutputPath", data.get("S3Path"))
    if s3 is not None and not isinstance(s3, str):
        raise DebugConfigError(f"S3OutputPath must be a string, not {type(s3).__name__}")
    params = _params(data.get("HookParameters"), "HookParameters")
    entries = data.get("CollectionConfigurations") or []
    if not isinstance(entries, list) or len(entries) > _MAX_ENTRIES:
        raise DebugConfigError(f"CollectionConfigurations must be a list of at most {_MAX_ENTRIES}")
    configs = tuple(_entry(entry, i) for i, entry in enumerate(entries))
    config = HookConfig(local, s3, params, configs)
    config.save_config(), config.reduction_config(), config.collections()  # check the values
    config.export_tensorboard()
    return config


def _text(data: Mapping[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str) or not value or len(value) > _MAX_VALUE:
        raise DebugConfigError(f"{key} must be a non-empty string of at most {_MAX_VALUE} chars")
    return value


def _params(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DebugConfigError(f"{where} must be an object of strings")
    if len(value) > _MAX_ENTRIES:
        raise DebugConfigError(f"{where} has {len(value)} entries, at most {_MAX_ENTRIES}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            item = "true" if item else "false"
        elif isinstance(item, int | float):
            item = str(item)
        if not isinstance(item, str) or len(item) > _MAX_VALUE:
            raise DebugConfigError(f"{where}.{key} must be a string of at most {_MAX_VALUE} chars")
        out[str(key)] = item
    return out


def _entry(entry: object, index: int) -> CollectionConfiguration:
    where = f"CollectionConfigurations[{index}]"
    if not isinstance(entry, Mapping):
        raise DebugConfigError(f"{where} must be an object")
    name = entry.get("CollectionName")
    if not isinstance(name, str) or not name or len(name) > 256:
        raise DebugConfigError(f"{where}.CollectionName must be a non-empty string")
    params = _params(entry.get("CollectionParameters"), f"{where}.CollectionParameters")
    return CollectionConfiguration(name, params)


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _save_dict(params: Mapping[str, str], mode: ModeKeys) -> dict[str, Any]:
    """The save keys that apply to ``mode``: the plain ones, then ``<mode>.`` ones over them."""
    out: dict[str, Any] = {}
    for prefix in ("", _MODE_PREFIX[mode]):
        for key in _SAVE_KEYS:
            if prefix + key in params:
                out[key] = params[prefix + key]
    return out


def _mode_configs(
    params: Mapping[str, str], base: Mapping[ModeKeys, Mapping[str, Any]]
) -> dict[ModeKeys, SaveConfigMode]:
    configs: dict[ModeKeys, SaveConfigMode] = {}
    for mode in ModeKeys:
        merged = {**base.get(mode, {}), **_save_dict(params, mode)}
        try:
            configs[mode] = SaveConfigMode.from_dict(merged)
        except ValueError as err:
            raise DebugConfigError(f"{mode.name.lower()} save config: {err}") from None
    return configs


def _collection(
    entry: CollectionConfiguration, base: Mapping[ModeKeys, Mapping[str, Any]]
) -> Collection:
    params = entry.parameters
    try:
        collection = Collection(entry.name)
        collection.save_config = SaveConfig(mode_save_configs=_mode_configs(params, base))
        if "reductions" in params or "save_raw_tensor" in params:
            collection.reduction_config = ReductionConfig.from_dict(params)
        if "include_regex" in params:
            collection.include(_split(params["include_regex"]))
        if "save_histogram" in params:
            collection.save_histogram = parse_bool("save_histogram", params["save_histogram"])
    except ValueError as err:
        raise DebugConfigError(f"collection {entry.name!r}: {err}") from None
    return collection
