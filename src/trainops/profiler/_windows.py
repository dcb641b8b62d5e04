"""Framework profiling windows: detailed (torch.profiler), dataloader, Python (cProfile/pyinstrument).

Each window runs once per process: it opens when a train step it covers begins (by step number
or by time) and closes when a train step ends after which it covers no more; files are written
at the close, atomically, under a name that says which steps it covered
(``<attempt>-step<first>-<last>``). A window that fails says so in one line and stays off; the
script never sees the error.
"""

from __future__ import annotations

import cProfile
import gzip
import os
import pstats
import time
from abc import ABC, abstractmethod
from inspect import signature
from pathlib import Path
from typing import Any

from trainops._registry import Registry
from trainops.profiler._files import hidden_temporary, say, write_atomic
from trainops.profiler._layout import chunk_prefix, dataloader_dir, detailed_dir, python_dir
from trainops.profiler._names import DATALOADER_COLUMNS
from trainops.profiler._pystats import TIMERS, write_python_stats
from trainops.profiler._series import SeriesWriter
from trainops.profiler._settings import Window

__all__ = [
    "WINDOWS",
    "DataloaderWindow",
    "DetailedWindow",
    "PythonWindow",
    "WindowRunner",
    "make_runner",
]


class WindowRunner(ABC):
    """One profiler's window in one process: ``open`` at its first step, ``close`` after its last."""

    def __init__(self, window: Window, root: Path, host: str, rank: int, attempt: int) -> None:
        self.window = window
        self.root, self.host, self.rank, self.attempt = root, host, rank, attempt
        self.active = False
        self.done = False
        self.first_step = 0
        self.opened_at = 0.0
        self.written: list[Path] = []

    def name(self, last_step: int) -> str:
        return f"{self.attempt}-step{self.first_step}-{last_step}"

    def open(self, step: int) -> None:
        self.first_step, self.opened_at = step, time.time()
        try:
            self._open(step)
            self.active = True
        except Exception as exc:
            self.done = True
            say(f"the {self.window.kind} profiling window is off: {type(exc).__name__}: {exc}")

    def step(self, step: int) -> None:
        """A train step inside the open window begins."""
        return None

    def close(self, last_step: int) -> None:
        if not self.active:
            return
        self.active, self.done = False, True
        try:
            self._close(last_step)
        except Exception as exc:
            say(f"the {self.window.kind} profiling window failed: {type(exc).__name__}: {exc}")

    @abstractmethod
    def _open(self, step: int) -> None: ...

    @abstractmethod
    def _close(self, last_step: int) -> None: ...


class DetailedWindow(WindowRunner):
    """torch.profiler over the window; a gzipped Chrome trace per window, steps annotated
    ``ProfilerStep#<n>`` (what HolisticTraceAnalysis splits iterations by), the rank in
    ``distributedInfo``."""

    profile: Any = None

    def _open(self, step: int) -> None:
        import torch
        from torch.profiler import ProfilerAction, ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)

        def record(step: int) -> ProfilerAction:  # a schedule: torch then marks each step
            return ProfilerAction.RECORD

        # acc_events keeps one profiler over the whole window: without it torch may make a new
        # one (dropping what was recorded) and warns into the script's log (seen on CUDA)
        extra: dict[str, Any] = (
            {"acc_events": True} if "acc_events" in signature(profile).parameters else {}
        )
        self.profile = profile(activities=activities, record_shapes=True, schedule=record, **extra)
        self.profile.step_num = step
        self.profile.start()

    def step(self, step: int) -> None:
        if self.profile is not None and step > self.profile.step_num:
            self.profile.step()

    def _close(self, last_step: int) -> None:
        profile, self.profile = self.profile, None
        profile.stop()
        target = self.root / detailed_dir(self.host, self.rank) / f"{self.name(last_step)}"
        final = target.with_name(target.name + ".pt.trace.json.gz")
        final.parent.mkdir(parents=True, exist_ok=True)
        raw = hidden_temporary(target.with_name(target.name + ".json"))
        try:
            profile.export_chrome_trace(str(raw))
            trace = _with_rank(raw.read_bytes(), self.rank)
            write_atomic(final, gzip.compress(trace, 6))
        finally:
            raw.unlink(missing_ok=True)
        self.written.append(final)


def _with_rank(trace: bytes, rank: int) -> bytes:
    """The trace with ``distributedInfo.rank`` (HolisticTraceAnalysis maps files to ranks by
    it; torch writes it only when a process group is up)."""
    if b'"distributedInfo"' in trace:
        return trace
    opening = trace.find(b"{")
    if opening < 0:
        return trace
    info = b'"distributedInfo": {"rank": %d},' % rank
    return trace[: opening + 1] + info + trace[opening + 1 :]


class DataloaderWindow(WindowRunner):
    """Per-batch fetch times and the worker count while open (the recorder feeds :meth:`row`)."""

    writer: SeriesWriter | None = None

    def _open(self, step: int) -> None:
        if self.writer is None:
            header = {"kind": "dataloader", "host": self.host, "rank": self.rank}
            header["attempt"] = self.attempt
            directory = self.root / dataloader_dir(self.host, self.rank)
            prefix = chunk_prefix(self.attempt)
            self.writer = SeriesWriter(directory, header, DATALOADER_COLUMNS, prefix=prefix)

    def row(self, values: tuple[float, ...]) -> None:
        if self.writer is not None:
            self.writer.append(values)

    def _close(self, last_step: int) -> None:
        if self.writer is not None:
            self.writer.flush()
            self.written.extend(self.writer.written)


class PythonWindow(WindowRunner):
    """cProfile (timer per ``cprofile_timer``) or pyinstrument over the window."""

    profiler: Any = None
    used = "cprofile"

    def _open(self, step: int) -> None:
        if self.window.python_profiler == "pyinstrument":
            try:
                from pyinstrument import Profiler  # type: ignore[import-not-found, unused-ignore]

                self.profiler, self.used = Profiler(interval=0.001), "pyinstrument"
                self.profiler.start()
                return
            except ImportError:
                say(
                    "pyinstrument is not installed (pip install 'trainops[pyinstrument]'); the "
                    "Python window uses cProfile",
                    once="pyinstrument",
                )
        clock = TIMERS[self.window.cprofile_timer]
        self.profiler = cProfile.Profile() if clock is None else cProfile.Profile(clock())
        self.profiler.enable()

    def _close(self, last_step: int) -> None:
        profiler, self.profiler = self.profiler, None
        directory = self.root / python_dir(self.host, self.rank) / self.name(last_step)
        window = {
            "first_step": self.first_step,
            "last_step": last_step,
            "start": self.opened_at,
            "end": time.time(),
            "profiler": self.used,
            "timer": self.window.cprofile_timer if self.used == "cprofile" else "wall",
            "host": self.host,
            "rank": self.rank,
            "pid": os.getpid(),
        }
        if self.used == "pyinstrument":
            self.written.extend(_pyinstrument_files(profiler, directory, window))
            return
        profiler.disable()
        self.written.extend(write_python_stats(directory, pstats.Stats(profiler), window))


def _pyinstrument_files(profiler: Any, directory: Path, window: dict[str, Any]) -> list[Path]:
    """pyinstrument's own HTML page, plus the JSON of the same top-functions shape."""
    import json

    session = profiler.stop()
    functions: dict[tuple[str, str, int], dict[str, Any]] = {}

    def walk(frame: Any) -> None:
        for child in frame.children:
            walk(child)
        if str(frame.function).startswith("["):
            return  # pyinstrument's own frames ([self], [await]...): time already in the parent
        key = (frame.function or "?", frame.file_path or "?", frame.line_no or 0)
        row = functions.setdefault(
            key,
            {"function": key[0], "file": key[1], "line": key[2], "calls": 0,
             "primitive_calls": 0, "total_time": 0.0, "cumulative_time": 0.0},
        )  # fmt: skip
        row["calls"] += 1
        row["total_time"] += frame.total_self_time
        row["cumulative_time"] += frame.time

    root = session.root_frame()
    if root is not None:
        walk(root)
    top = sorted(functions.values(), key=lambda row: -row["cumulative_time"])[:100]
    document = {**window, "functions": top}
    return [
        write_atomic(directory / "python_stats.json", json.dumps(document, indent=1).encode()),
        write_atomic(directory / "python_stats.html", profiler.output_html().encode()),
    ]


#: ``Window.kind`` -> its runner (the kinds are profiler._settings' ``WINDOW_KINDS``).
WINDOWS: Registry[type[WindowRunner]] = Registry("profiling window kind", error=ValueError)
WINDOWS.register("detailed", DetailedWindow)
WINDOWS.register("dataloader", DataloaderWindow)
WINDOWS.register("python", PythonWindow)


def make_runner(window: Window, root: Path, host: str, rank: int, attempt: int) -> WindowRunner:
    return WINDOWS.lookup(window.kind)(window, root, host, rank, attempt)
