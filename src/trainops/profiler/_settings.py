"""What the in-script recorder reads from its environment: where to write and which windows run.

Two variables, both set by the agent's profiler sidecar (unset: the recorder does nothing):

- ``TRAINOPS_PROFILER_DIR``: the host's local profiler directory (the root of ``_layout``);
- ``TRAINOPS_PROFILER_CONFIG``: a JSON file with the job's settings. The recorder reads these
  keys and no others, each optional (a missing or ill-typed key takes its default):

  ====================================================  ======================================
  ``host``                                              the host's name (default:
                                                        ``SM_CURRENT_HOST``, else the hostname)
  ``attempt``                                           the job's attempt, from 1 (default 1)
  ``job_start``                                         Unix seconds the job began (default:
                                                        when the recorder started)
  ``profiler_config.disable_profiler``                  true: record nothing
  ``profiler_config.framework_profile_params``          null or absent: step timing only, no
                                                        profiling window
  ``...framework_profile_params.detailed_profiling_config``,
  ``...dataloader_profiling_config``,
  ``...python_profiling_config``                        each null (that profiler is off) or a
                                                        window: ``start_step`` + ``num_steps``,
                                                        or ``start_unix_time`` + ``duration``
                                                        (given as ``{}``: the SDK's default
                                                        steps, 5/1, 7/1 and 9/3)
  ``...python_profiling_config.python_profiler``        ``cprofile`` (default) or ``pyinstrument``
  ``...python_profiling_config.cprofile_timer``         ``total_time`` (default), ``cpu_time``,
                                                        ``off_cpu_time``, ``default``
  ====================================================  ======================================

  The ``profiler_config`` value is ``ProfilerSpec.to_json()`` (``protocol/_observe.py``), whose
  windows the spec has already filled with the SDK's defaults. Without a ``profiler_config``
  key, its keys are read at the top level of the document (where the profiler sidecar writes
  them). A missing file means defaults; a file that cannot be read or parsed gives one line
  naming it, and defaults.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.profiler._layout import CONFIG_ENV, DIR_ENV

__all__ = ["WINDOW_KINDS", "RecorderSettings", "Window", "rank_from_env", "read_settings"]

WINDOW_KINDS = ("detailed", "dataloader", "python")
_TIMERS = ("total_time", "cpu_time", "off_cpu_time", "default")
_PROFILERS = ("cprofile", "pyinstrument")
_DEFAULT_DURATION = 60.0
#: The SDK's step window of each profiler (start_step, num_steps), for a window given empty.
_DEFAULT_STEPS = {"detailed": (5, 1), "dataloader": (7, 1), "python": (9, 3)}


@dataclass(frozen=True, slots=True)
class Window:
    """When one framework profiler runs: train steps ``[start_step, start_step + num_steps)``,
    or the seconds ``[start, start + duration)`` (``start_unix_time``; None: the job's start)."""

    kind: str
    start_step: int | None = None
    num_steps: int = 1
    start_unix_time: float | None = None
    duration: float | None = None
    python_profiler: str = "cprofile"
    cprofile_timer: str = "total_time"

    @property
    def by_time(self) -> bool:
        return self.start_unix_time is not None or self.duration is not None

    def covers(self, step: int, now: float, job_start: float) -> bool:
        """Whether train step ``step``, beginning at Unix time ``now``, is in the window."""
        if self.by_time:
            start = self.start_unix_time if self.start_unix_time is not None else job_start
            return start <= now < start + (self.duration or _DEFAULT_DURATION)
        if self.start_step is None:
            return False
        return self.start_step <= step < self.start_step + self.num_steps

    def ended(self, next_step: int, now: float, job_start: float) -> bool:
        """Whether the window is over once a train step ended at ``now`` (``next_step`` next)."""
        if self.by_time:
            start = self.start_unix_time if self.start_unix_time is not None else job_start
            return now >= start + (self.duration or _DEFAULT_DURATION)
        return self.start_step is None or next_step >= self.start_step + self.num_steps


@dataclass(frozen=True, slots=True)
class RecorderSettings:
    """Everything the recorder needs; ``directory`` None means recording is off."""

    directory: Path | None
    host: str
    attempt: int = 1
    job_start: float = field(default_factory=time.time)
    windows: tuple[Window, ...] = ()
    problems: tuple[str, ...] = ()


def rank_from_env(env: Mapping[str, str]) -> int | None:
    """The process's global rank from ``RANK`` or ``OMPI_COMM_WORLD_RANK``; None if neither."""
    for name in ("RANK", "OMPI_COMM_WORLD_RANK"):
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def read_settings(env: Mapping[str, str] | None = None) -> RecorderSettings:
    """The settings from ``env`` (default ``os.environ``); never raises."""
    env = os.environ if env is None else env
    host = env.get("SM_CURRENT_HOST") or socket.gethostname() or "localhost"
    directory = env.get(DIR_ENV, "").strip()
    if not directory:
        return RecorderSettings(None, host)
    raw, problem = _load(env.get(CONFIG_ENV, "").strip())
    problems = [problem] if problem else []
    settings = _from_document(Path(directory), host, raw, problems)
    return settings


def _load(path: str) -> tuple[dict[str, Any], str | None]:
    if not path or not os.path.exists(path):
        return {}, None
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError) as exc:
        return {}, f"cannot read the profiler settings {path} ({exc}): no profiling windows"
    if not isinstance(raw, dict):
        return {}, f"the profiler settings {path} are not a JSON object: no profiling windows"
    return raw, None


def _from_document(
    directory: Path, host: str, raw: dict[str, Any], problems: list[str]
) -> RecorderSettings:
    host = _typed(raw, "host", str, host, problems) or host
    attempt = max(1, _typed(raw, "attempt", int, 1, problems))
    job_start = float(_typed(raw, "job_start", float, time.time(), problems))
    config = _typed(raw, "profiler_config", dict, raw, problems)  # nested, or at the top
    if _typed(config, "disable_profiler", bool, False, problems):
        return RecorderSettings(None, host, attempt, job_start, (), tuple(problems))
    params = _typed(config, "framework_profile_params", dict, {}, problems)
    windows = []
    for kind in WINDOW_KINDS:
        window = _window(kind, _typed(params, f"{kind}_profiling_config", dict, None, problems))
        if window is not None:
            windows.append(window)
    return RecorderSettings(directory, host, attempt, job_start, tuple(windows), tuple(problems))


def _typed(raw: Mapping[str, Any], key: str, kind: type, default: Any, problems: list[str]) -> Any:
    value: Any = raw.get(key)
    if value is None:
        return default
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        value = float(value)
    if kind is int and isinstance(value, bool):
        value = None
    finite = not isinstance(value, float) or math.isfinite(value)
    if not isinstance(value, kind) or not finite:
        problems.append(f"profiler settings: {key!r} is not a {kind.__name__}; ignored")
        return default
    return value


def _window(kind: str, raw: dict[str, Any] | None) -> Window | None:
    """The window of one profiler (None: off); an ill-typed field is left at its default."""
    if raw is None:
        return None
    ignored: list[str] = []
    default_start, default_count = _DEFAULT_STEPS[kind]
    start_step = _typed(raw, "start_step", int, None, ignored)
    num_steps = _typed(raw, "num_steps", int, default_count, ignored)
    start_time = _typed(raw, "start_unix_time", float, None, ignored)
    duration = _typed(raw, "duration", float, None, ignored)
    profiler = str(raw.get("python_profiler") or "cprofile").lower()
    timer = str(raw.get("cprofile_timer") or "total_time").lower()
    if start_step is None and start_time is None and duration is None:
        start_step = default_start
    return Window(
        kind,
        start_step,
        max(1, num_steps),
        start_time,
        duration if duration is None or duration > 0 else None,
        profiler if profiler in _PROFILERS else "cprofile",
        timer if timer in _TIMERS else "total_time",
    )
