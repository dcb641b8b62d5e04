"""The jobs waiting for capacity, in memory, grouped by what they ask for.

A pass of the scheduler must not cost more with more waiting jobs. Jobs that ask for the same
thing (instance type and host count: a *need*) fit or not together: if the oldest of them does
not fit, no later one does, since capacity only shrinks during a pass. So the queue keeps, per
need, the waiting jobs in submission order, and a pass tries the oldest job of each need,
oldest first, moving on within a need only while its jobs fit: first fit in submission order,
at the cost of the needs (a few) rather than of the jobs (thousands of tuning trials).

The store stays the record: the queue is loaded from it once when the control plane starts and
told of every job that starts waiting (a submission, a relaunch after an internal error). A job
that stops waiting otherwise (stopped while Pending) is dropped when it reaches the front of its
need: the scheduler reads each job's record before placing it. Jobs added since their need last
failed to fit are listed apart, so they get their Pending message without a pass reading the
rest.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass, field

from trainops.store import JobRecord

__all__ = ["Need", "WaitingQueue", "need_of"]

Need = tuple[str, int]


def need_of(job: JobRecord) -> Need:
    """What a job asks of the backend: its instance type and host count."""
    return (job.spec.instance_type, job.spec.instance_count)


@dataclass
class _Line:
    """The waiting jobs of one need: ``(order, name)`` in a heap, and those not told yet."""

    heap: list[tuple[int, str]] = field(default_factory=list)
    untold: list[str] = field(default_factory=list)


class WaitingQueue:
    """Waiting jobs by need; thread-safe (submissions add while a pass runs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: dict[Need, _Line] = {}
        self._queued: set[str] = set()

    def add(self, job: JobRecord) -> None:
        """``job`` waits (again) to be placed; a job already queued is not queued twice."""
        with self._lock:
            if job.name in self._queued:
                return
            self._queued.add(job.name)
            line = self._lines.setdefault(need_of(job), _Line())
            heapq.heappush(line.heap, (job.order, job.name))
            line.untold.append(job.name)

    def __len__(self) -> int:
        with self._lock:
            return len(self._queued)

    def heads(self) -> list[tuple[int, str, Need]]:
        """The oldest job of each need: ``(order, name, need)``, oldest first."""
        with self._lock:
            found = [(line.heap[0][0], line.heap[0][1], need) for need, line in self._lines.items()]
        return sorted(found)

    def next_of(self, need: Need) -> tuple[int, str] | None:
        with self._lock:
            line = self._lines.get(need)
            return line.heap[0] if line is not None and line.heap else None

    def pop(self, need: Need, name: str) -> None:
        """``name``, the oldest job of ``need``, no longer waits (placed, failed or stopped)."""
        with self._lock:
            line = self._lines.get(need)
            if line is None or not line.heap or line.heap[0][1] != name:
                return
            heapq.heappop(line.heap)
            self._queued.discard(name)
            if not line.heap:
                del self._lines[need]

    def queued(self) -> list[tuple[int, str, Need]]:
        """Every queued job, ``(order, name, need)``, oldest first (for backends that must be
        asked about each one)."""
        with self._lock:
            found = [(o, n, need) for need, line in self._lines.items() for o, n in line.heap]
        return sorted(found)

    def remove(self, need: Need, name: str) -> None:
        """``name`` of ``need`` no longer waits, wherever it is in the queue."""
        with self._lock:
            line = self._lines.get(need)
            if line is None or name not in self._queued:
                return
            line.heap = [entry for entry in line.heap if entry[1] != name]
            heapq.heapify(line.heap)
            self._queued.discard(name)
            if not line.heap:
                del self._lines[need]

    def take_untold(self, need: Need) -> list[str]:
        """The jobs of ``need`` queued since this was last asked (to be told they wait)."""
        with self._lock:
            line = self._lines.get(need)
            if line is None:
                return []
            taken, line.untold = line.untold, []
            return taken
