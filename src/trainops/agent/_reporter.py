"""Reporting: the seam between the agent and the control plane, and its HTTP implementation.

:class:`Reporter` is what :class:`~trainops.agent.HostAgent` talks to. :class:`HttpReporter`
numbers events from 1, appends each to ``journal.jsonl`` before it is sent (so a restarted
control plane can read what never arrived), and posts batches from a sender thread at least
every 0.5 s (a heartbeat, possibly empty); it resends everything above the acknowledged sequence
number after a failure, so the control plane, which stores each sequence number once, sees every
event exactly once.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import IO, Any, Protocol

from trainops.agent._client import AgentApiError, AgentClient
from trainops.protocol import AgentEvent, Command, EventKind

__all__ = ["EventJournal", "HttpReporter", "Reporter"]

MAX_BATCH = 500
HEARTBEAT_SECONDS = 0.5
MIN_POST_GAP_SECONDS = 0.05
MAX_BACKOFF_SECONDS = 2.0


class Reporter(Protocol):
    """Where a host agent's events go and where its commands come from."""

    def emit(self, kind: EventKind, data: dict[str, Any]) -> AgentEvent:
        """Record one event (thread-safe) and return it with its sequence number."""
        ...

    def commands(self) -> list[Command]:
        """Commands received since the last call (each returned once)."""
        ...

    def close(self, timeout: float = 30.0) -> bool:
        """Deliver what is pending, waiting at most ``timeout`` s; ``True`` if all was delivered."""
        ...


class EventJournal:
    """``journal.jsonl``: one JSON event per line, flushed as written, fsynced on request."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def append(self, event: AgentEvent, *, durable: bool = False) -> None:
        self._file.write(json.dumps(event.to_json(), separators=(",", ":")) + "\n")
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    @staticmethod
    def read(path: Path) -> list[AgentEvent]:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [AgentEvent.from_json(json.loads(line)) for line in lines if line.strip()]


class HttpReporter:
    """A :class:`Reporter` that posts to the agent API; call :meth:`start` before emitting."""

    def __init__(
        self,
        client: AgentClient,
        attempt: int,
        journal_path: Path,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        min_gap: float = MIN_POST_GAP_SECONDS,
    ) -> None:
        self._client = client
        self._attempt = attempt
        self._journal = EventJournal(journal_path)
        self._heartbeat = heartbeat
        self._min_gap = min_gap
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._seq = 0
        self._acked = 0
        self._pending: list[AgentEvent] = []
        self._commands: list[Command] = []
        self._closing_until: float | None = None
        self._thread = threading.Thread(target=self._run, name="agent-reporter", daemon=True)
        self.last_error: str | None = None

    @property
    def acked_seq(self) -> int:
        with self._lock:
            return self._acked

    def start(self) -> HttpReporter:
        self._thread.start()
        return self

    def emit(self, kind: EventKind, data: dict[str, Any]) -> AgentEvent:
        with self._lock:
            self._seq += 1
            event = AgentEvent(seq=self._seq, ts=time.time(), kind=kind, data=data)
            self._journal.append(event, durable=kind is EventKind.EXIT)
            self._pending.append(event)
        self._wake.set()
        return event

    def commands(self) -> list[Command]:
        with self._lock:
            taken, self._commands = self._commands, []
        return taken

    def close(self, timeout: float = 30.0) -> bool:
        with self._lock:
            self._closing_until = time.monotonic() + timeout
        self._closed.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout + 1.0)
        self._client.close()
        with self._lock:
            self._journal.close()
            return not self._pending

    def _run(self) -> None:
        backoff = 0.0
        while True:
            started = time.monotonic()
            try:
                self._post_once()
                backoff = 0.0
            except Exception as exc:  # the sender must outlive any one failure
                self.last_error = str(exc) if isinstance(exc, AgentApiError) else repr(exc)
                backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF_SECONDS)
                self._client.refresh_server()
            if self._finished():
                return
            self._pause(started, backoff)

    def _post_once(self) -> None:
        with self._lock:
            batch = self._pending[:MAX_BATCH]
        reply = self._client.post_events(self._attempt, batch)
        with self._lock:
            self._acked = max(self._acked, reply.acked_seq)
            self._pending = [e for e in self._pending if e.seq > self._acked]
            self._commands.extend(reply.commands)

    def _finished(self) -> bool:
        with self._lock:
            if self._closing_until is None:
                return False
            return not self._pending or time.monotonic() >= self._closing_until

    def _pause(self, started: float, backoff: float) -> None:
        """Sleep until the next post: the backoff after a failure, else until events arrive
        (but not sooner than ``min_gap`` after the last post) or the heartbeat is due."""
        if backoff:
            self._sleep_unless_closing(backoff)
            return
        with self._lock:
            more = len(self._pending) > 0 and self._closing_until is not None
        if more:
            return
        self._wake.wait(max(0.0, self._heartbeat - (time.monotonic() - started)))
        self._wake.clear()
        # Coalesce bursts of lines into fewer posts, except when closing.
        self._closed.wait(max(0.0, self._min_gap - (time.monotonic() - started)))

    def _sleep_unless_closing(self, seconds: float) -> None:
        with self._lock:
            until = self._closing_until
        if until is not None:
            seconds = min(seconds, max(0.0, until - time.monotonic()))
        time.sleep(seconds)
