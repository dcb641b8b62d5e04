"""The store's commits as a signal: a version that moves on every committed write, the version
each topic last moved at, and listeners told right after each commit.

A write names its topic (what it changed: ``jobs``, ``hosts``, ``output``, ``tuning``,
``studies``), so a follower of the jobs list is not woken by every log line. Listeners run on
the committing thread, after the commit and outside the store's lock: they must be quick (the
server's change feed only schedules a wake-up on its event loop). The versions live in memory:
they start at 0 with each process (a follower's cursor names its server's run, see
``server/_events.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection

__all__ = ["COMMIT_TOPICS", "CommitSignal"]

#: What a committed write changed: a job's record (status, spec, artifacts, checkpoints, rule
#: verdicts, tags), its hosts, its output (log lines and metrics), a tuning job or its trials,
#: a scaling study.
COMMIT_TOPICS = ("jobs", "hosts", "output", "tuning", "studies")

Listener = Callable[[str], None]


class CommitSignal:
    """Commit versions of one store, by topic, and who to tell of a commit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._moved = dict.fromkeys(COMMIT_TOPICS, 0)
        self._listeners: list[Listener] = []

    def committed(self, topic: str) -> None:
        """A write of ``topic`` was committed: move the versions and tell every listener."""
        with self._lock:
            self._version += 1
            self._moved[topic] = self._version
            listeners = list(self._listeners)
        for listener in listeners:
            listener(topic)

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def changed_since(self, version: int, topics: Collection[str]) -> list[str]:
        """Which of ``topics`` moved after ``version`` (in :data:`COMMIT_TOPICS` order)."""
        with self._lock:
            return [t for t in COMMIT_TOPICS if t in topics and self._moved[t] > version]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Tell ``listener`` of each commit (with its topic) from now on; returns the function
        that stops it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe
