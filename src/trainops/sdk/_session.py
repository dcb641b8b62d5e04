"""One connection per process for the Python SDK, held until the interpreter exits.

Without a configured or running server of the home the connection owns an embedded server
(see :func:`trainops.client.connect`), and the jobs it controls
cannot outlive it: at exit, jobs submitted here that are still running are asked to stop and
waited for, so no host agent is left running without a control plane.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from trainops._errors import TrainopsError
from trainops._settings import Settings
from trainops.client import TERMINAL_STATUSES, Client, connect, follow

__all__ = ["Session", "close_sessions", "session_for", "wait_for_tuning"]

TUNING_ENDED = ("Completed", "Stopped", "Failed")
TUNING_POLL_S = 1.0


class Session:
    """A :class:`Client` kept open (with its embedded server, if any) and the jobs sent through it."""

    def __init__(self, settings: Settings) -> None:
        self._stack = ExitStack()
        self.client: Client = self._stack.enter_context(connect(settings))
        self.jobs: list[str] = []
        self.tuning_jobs: list[str] = []

    def close(self) -> None:
        try:
            if self.client.embedded:
                for tuning in self.tuning_jobs:
                    _stop_tuning_and_wait(self.client, tuning)
                for name in self.jobs:
                    _stop_and_wait(self.client, name)
        finally:
            self._stack.close()


_SESSIONS: dict[Settings, Session] = {}
_LOCK = threading.Lock()


def session_for(settings: Settings) -> Session:
    """The process's session for ``settings``, opened on first use."""
    with _LOCK:
        session = _SESSIONS.get(settings)
        if session is None:
            session = _SESSIONS[settings] = Session(settings)
        return session


def close_sessions() -> None:
    """Close every session (stopping the embedded servers' unfinished jobs first)."""
    with _LOCK:
        sessions = list(_SESSIONS.values())
        _SESSIONS.clear()
    for session in sessions:
        session.close()


atexit.register(close_sessions)


def _stop_and_wait(client: Client, name: str) -> None:
    try:
        status = client.describe(name)["TrainingJobStatus"]
        if status in TERMINAL_STATUSES:
            return
        print(
            f"trainops: stopping job {name}: the embedded server ends with this process "
            "(set TRAINOPS_SERVER to a running `trainops server` to keep jobs running)",
            file=sys.stderr,
        )
        if status == "InProgress":
            client.stop(name)
        follow(client, name, on_line=_ignore)
    except TrainopsError as exc:
        print(f"trainops: could not stop job {name}: {exc}", file=sys.stderr)


def wait_for_tuning(
    client: Client, name: str, on_progress: Callable[[str], None]
) -> dict[str, Any]:
    """Poll tuning job ``name`` until it ends, telling ``on_progress`` a line each time its
    counts or its best trial move, and how it ended; returns its final description."""
    shown = None
    while True:
        described = client.describe_tuning_job(name)
        line = progress_line(described)
        if line != shown:
            on_progress(line)
            shown = line
        if described["HyperParameterTuningJobStatus"] in TUNING_ENDED:
            why = described.get("CompletionReason") or described.get("FailureReason")
            if why:
                on_progress(f"{name}: {why}")
            return described
        time.sleep(TUNING_POLL_S)


def progress_line(described: dict[str, Any]) -> str:
    """``<name>: <status> (Completed 2, InProgress 1, ...); best <trial> (<objective>)``."""
    counters = described.get("TrainingJobStatusCounters", {})
    counts = ", ".join(f"{k} {v}" for k, v in counters.items())
    line = (
        f"{described['HyperParameterTuningJobName']}: "
        f"{described['HyperParameterTuningJobStatus']} ({counts})"
    )
    best = described.get("BestTrainingJob")
    if best is not None:
        value = best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
        line += f"; best {best['TrainingJobName']} ({value:.6g})"
    return line


def _stop_tuning_and_wait(client: Client, name: str) -> None:
    try:
        status = client.describe_tuning_job(name)["HyperParameterTuningJobStatus"]
        if status in TUNING_ENDED:
            return
        print(
            f"trainops: stopping tuning job {name}: the embedded server ends with this process "
            "(set TRAINOPS_SERVER to a running `trainops server` to keep it running)",
            file=sys.stderr,
        )
        if status == "InProgress":
            client.stop_tuning_job(name)
        wait_for_tuning(client, name, _say_nothing)
    except TrainopsError as exc:
        print(f"trainops: could not stop tuning job {name}: {exc}", file=sys.stderr)


def _say_nothing(_line: str) -> None:
    """Progress is not shown while a tuning job is being stopped at exit."""


def _ignore(_line: dict[str, Any]) -> None:
    """Log lines are not shown while a job is being stopped at exit."""
