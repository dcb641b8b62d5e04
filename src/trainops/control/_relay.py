"""Remote commands between the hosts of a job: the control plane's side of the relay.

A launcher that reaches other hosts with a remote shell (``mpirun`` starting Open MPI's daemons
as ``ssh algo-2 orted …``) gets an ssh-like agent instead (see
``trainops.agent.launchers.remote_shell``): it asks its own host agent, which opens a spawn here.
The target host's agent finds it among the commands of its next report, hands it to the host's
keeper process and reports how it went; the asking agent polls until it has ended. Nothing here
runs a command: the relay only carries words from one agent of a job to another of the same job
and attempt.

Spawns live in memory: one is needed only while its asking process waits, and a control plane
that restarts loses the waiting ``mpirun``'s daemons anyway (the job then fails on its own).
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from trainops.protocol import Command, SpawnState

__all__ = ["MAX_OPEN_SPAWNS", "MAX_SPAWN_BYTES", "MAX_SPAWN_WORDS", "Spawn", "SpawnRelay"]

MAX_OPEN_SPAWNS = 64  # unfinished spawns of one job at a time (mpirun opens one a host)
MAX_SPAWN_WORDS = 4096
MAX_SPAWN_BYTES = 256 * 1024
_FORGET_AFTER_S = 600.0  # an ended spawn nobody asked about again is dropped after this
_UNDELIVERED_S = 3600.0  # and so is one no target took in an hour (its asker is long gone)
_ENDED = (SpawnState.EXITED, SpawnState.FAILED)


@dataclass(slots=True)
class Spawn:
    """One remote command and where it stands."""

    spawn_id: str
    job: str
    attempt: int
    source: str
    target: str
    words: list[str]
    state: SpawnState = SpawnState.PENDING
    exit_code: int | None = None
    error: str | None = None
    ended_at: float | None = None
    created_at: float = field(default_factory=time.monotonic)

    def to_json(self) -> dict[str, Any]:
        return {
            "spawn_id": self.spawn_id,
            "target": self.target,
            "state": str(self.state),
            "exit_code": self.exit_code,
            "error": self.error,
        }


class SpawnRelay:
    """The spawns of every running job, keyed by id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spawns: dict[str, Spawn] = {}

    def open(self, job: str, attempt: int, source: str, target: str, words: list[str]) -> Spawn:
        """A new pending spawn (the caller has checked that both hosts belong to the job)."""
        check_words(words)
        spawn = Spawn(secrets.token_hex(8), job, attempt, source, target, list(words))
        with self._lock:
            self._forget_old()
            unfinished = sum(
                1 for s in self._spawns.values() if s.job == job and s.state not in _ENDED
            )
            if unfinished >= MAX_OPEN_SPAWNS:
                raise ValueError(f"job {job!r} already has {unfinished} unfinished remote commands")
            self._spawns[spawn.spawn_id] = spawn
        return spawn

    def get(self, job: str, attempt: int, spawn_id: str) -> Spawn | None:
        with self._lock:
            spawn = self._spawns.get(spawn_id)
        if spawn is None or spawn.job != job or spawn.attempt != attempt:
            return None
        return spawn

    def commands_for(self, job: str, attempt: int, host: str) -> list[Command]:
        """The pending spawns of ``host``, as commands (sent again until reported started)."""
        with self._lock:
            pending = [
                s
                for s in self._spawns.values()
                if s.job == job
                and s.attempt == attempt
                and s.target == host
                and s.state is SpawnState.PENDING
            ]
        return [Command(kind="spawn", spawn_id=s.spawn_id, words=list(s.words)) for s in pending]

    def update(
        self, spawn: Spawn, state: SpawnState, exit_code: int | None, error: str | None
    ) -> None:
        """Record the target's report; an ended spawn stays as it ended."""
        with self._lock:
            if spawn.state in _ENDED:
                return
            spawn.state = state
            spawn.exit_code = exit_code if state is SpawnState.EXITED else None
            spawn.error = error[:2000] if error and state in _ENDED else None
            if state in _ENDED:
                spawn.ended_at = time.monotonic()

    def _forget_old(self) -> None:
        now = time.monotonic()
        old = [
            key
            for key, s in self._spawns.items()
            if (s.ended_at is not None and now - s.ended_at > _FORGET_AFTER_S)
            or (s.state is SpawnState.PENDING and now - s.created_at > _UNDELIVERED_S)
        ]
        for key in old:
            del self._spawns[key]


def check_words(words: object) -> list[str]:
    """``words`` as a list of strings within the relay's bounds, else :class:`ValueError`."""
    if not isinstance(words, list) or not words:
        raise ValueError("words must be a non-empty list of strings")
    if not all(isinstance(w, str) for w in words):
        raise ValueError("words must be a non-empty list of strings")
    if len(words) > MAX_SPAWN_WORDS:
        raise ValueError(f"a remote command has at most {MAX_SPAWN_WORDS} words")
    if sum(len(w.encode("utf-8", "surrogatepass")) + 1 for w in words) > MAX_SPAWN_BYTES:
        raise ValueError(f"a remote command has at most {MAX_SPAWN_BYTES} bytes")
    if any("\0" in w for w in words):
        raise ValueError("a remote command's words cannot contain NUL")
    return words
