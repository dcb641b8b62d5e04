"""When each host agent was last heard from: liveness that works for every backend.

Agents report at least every second (every 0.5 s while they have news; a heartbeat, possibly
with no events), so a host whose agent has not been heard from for
``ControlSettings.heartbeat_timeout`` seconds is lost, wherever it runs and whatever the backend
believes; the backend's own signal (a process that exited, an actor that
died) is only a faster hint. The clock of a host starts when the control plane first looks at it
(its launch, or the adoption of a running agent after a restart), so a restarted control plane
gives every agent the whole timeout to find it again. Kept in memory: it is about this process's
view of the agents, not about the job.
"""

from __future__ import annotations

import threading
import time

__all__ = ["Heartbeats"]

_Key = tuple[str, str, int]


class Heartbeats:
    """Last-heard times per (job, host, attempt), thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heard: dict[_Key, float] = {}

    def heard(self, job: str, host: str, attempt: int) -> None:
        """The agent of this host called the agent API just now."""
        with self._lock:
            self._heard[(job, host, attempt)] = time.monotonic()

    def silent_for(self, job: str, host: str, attempt: int) -> float:
        """Seconds since the host was last heard from (0 the first time it is asked about)."""
        now = time.monotonic()
        with self._lock:
            return now - self._heard.setdefault((job, host, attempt), now)

    def forget(self, job: str, host: str, attempt: int) -> None:
        with self._lock:
            self._heard.pop((job, host, attempt), None)
