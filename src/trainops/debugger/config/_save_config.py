"""Which steps the hook saves: :class:`SaveConfigMode` for one mode, :class:`SaveConfig` per mode.

A step is saved when it is in ``save_steps``, or when it lies in ``[start_step, end_step)`` and
is a multiple of ``save_interval`` (smdebug's rule: ``save_interval=100, start_step=150`` saves
200, 300, ...). Steps are the mode's own steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainops.debugger.modes import ModeKeys, parse_mode

__all__ = ["DEFAULT_SAVE_INTERVAL", "SaveConfig", "SaveConfigMode"]

DEFAULT_SAVE_INTERVAL = 500
_MAX_SAVE_STEPS = 100_000
_KEYS = ("save_interval", "save_steps", "start_step", "end_step")


def _step_int(name: str, value: object, *, least: int) -> int:
    """An integer (or a string holding one, as the API sends) no smaller than ``least``."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{name} must be an integer, not {value!r}") from None
    if not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    if value < least:
        raise ValueError(f"{name} must be at least {least}, not {value}")
    return value


def _save_steps(value: object) -> tuple[int, ...]:
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, Iterable):
        raise ValueError(f"save_steps must be a list of integers, not {value!r}")
    steps = tuple(_step_int("save_steps", step, least=0) for step in value)
    if len(steps) > _MAX_SAVE_STEPS:
        raise ValueError(f"save_steps has {len(steps)} entries, at most {_MAX_SAVE_STEPS}")
    return steps


@dataclass(frozen=True)
class SaveConfigMode:
    """The save schedule of one mode (``end_step`` is exclusive; ``None`` means no end)."""

    save_interval: int = DEFAULT_SAVE_INTERVAL
    start_step: int = 0
    end_step: int | None = None
    save_steps: tuple[int, ...] = field(default=())

    def __init__(
        self,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int] | str | None = None,
    ) -> None:
        interval = DEFAULT_SAVE_INTERVAL if save_interval is None else save_interval
        object.__setattr__(self, "save_interval", _step_int("save_interval", interval, least=1))
        start = 0 if start_step is None else _step_int("start_step", start_step, least=0)
        object.__setattr__(self, "start_step", start)
        end = None if end_step is None else _step_int("end_step", end_step, least=0)
        object.__setattr__(self, "end_step", end)
        object.__setattr__(
            self, "save_steps", () if save_steps is None else _save_steps(save_steps)
        )

    def should_save_step(self, step: int) -> bool:
        if step in self.save_steps:
            return True
        in_range = step >= self.start_step and (self.end_step is None or step < self.end_step)
        return in_range and step % self.save_interval == 0

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "save_interval": self.save_interval,
            "save_steps": list(self.save_steps),
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_dict(
        cls, params: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
    ) -> SaveConfigMode:
        if not isinstance(params, Mapping):
            raise ValueError(f"a save config must be a mapping, not {type(params).__name__}")
        unknown = sorted(set(params) - set(_KEYS))
        if unknown:
            raise ValueError(
                f"unknown save config key {unknown[0]!r} (allowed: {', '.join(_KEYS)})"
            )
        merged = {**(defaults or {}), **params}
        return cls(**{key: merged.get(key) for key in _KEYS})


class SaveConfig:
    """A :class:`SaveConfigMode` for each mode; modes left out of ``mode_save_configs`` use the
    top-level arguments."""

    def __init__(
        self,
        mode_save_configs: Mapping[Any, SaveConfigMode | Mapping[str, Any] | None] | None = None,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int] | str | None = None,
    ) -> None:
        default = SaveConfigMode(save_interval, start_step, end_step, save_steps)
        self.mode_save_configs: dict[ModeKeys, SaveConfigMode] = dict.fromkeys(ModeKeys, default)
        for key, value in (mode_save_configs or {}).items():
            mode = parse_mode(key)
            if isinstance(value, SaveConfigMode):
                self.mode_save_configs[mode] = value
            elif value is not None:
                self.mode_save_configs[mode] = SaveConfigMode.from_dict(value)

    def get_save_config(self, mode: ModeKeys | str | int) -> SaveConfigMode:
        return self.mode_save_configs[parse_mode(mode)]

    def set_save_config(self, mode: ModeKeys | str | int, save_config_mode: SaveConfigMode) -> None:
        self.mode_save_configs[parse_mode(mode)] = save_config_mode

    def should_save_step(self, mode: ModeKeys | str | int, mode_step: int) -> bool:
        return self.get_save_config(mode).should_save_step(mode_step)

    def to_json_dict(self) -> dict[str, Any]:
        return {mode.name: config.to_json_dict() for mode, config in self.mode_save_configs.items()}

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> SaveConfig:
        """From :meth:`to_json_dict`'s shape (``{"TRAIN": {...}, ...}``)."""
        if not isinstance(params, Mapping):
            raise ValueError(f"a save config must be a mapping, not {type(params).__name__}")
        return cls(mode_save_configs=params)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfig):
            return NotImplemented
        return self.mode_save_configs == other.mode_save_configs

    def __hash__(self) -> int:
        return hash(tuple(self.mode_save_configs.items()))

    def __repr__(self) -> str:
        return f"SaveConfig({self.mode_save_configs!r})"
