"""Runs the control plane's services: one thread each, fed ticks and job changes.

The controller calls :meth:`ServiceHub.job_changed` with a job's name whenever it records a
change; that only adds the name to each service's pending set and wakes its thread, so the
caller (which may hold the controller's lock) never waits for a service. A thread delivers the
job's record as read from the store after the job's latest change: the first thread to get to
a change reads it, the others are handed the same record (:class:`SharedReads`; a job's change
cost one store read per service before, six reads where one does). A service that raises is
logged and keeps running. :meth:`ServiceHub.metrics_stored` likewise only notes a job that
stored metric points, for the services that ask for them, each told at most once per its gap.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable

from trainops.control.services._base import ControlService
from trainops.store import JobRecord

__all__ = ["ServiceHub", "ServiceRunner", "SharedReads"]

_log = logging.getLogger("trainops.control")
_CLOSE_TIMEOUT_S = 10.0

JobReader = Callable[[str], JobRecord | None]
_KEPT_NAMES = 512  # jobs whose last change (and record) the shared reads remember, at most


class SharedReads:
    """The records the runners deliver, read once per change and shared.

    Each change of a job gets a number, larger than every number before it. A record read after
    the change numbered ``n`` was heard is kept under ``n`` and handed out while ``n`` is still
    the job's latest change, so a record is never older than the change a runner delivers. The
    runners wake together on a change: one reads, the others wait for its read.
    """

    def __init__(self, read_job: JobReader, keep: int = _KEPT_NAMES) -> None:
        self._read_job, self._keep = read_job, keep
        self._lock = threading.Lock()
        self._count = itertools.count(1)
        self._latest: dict[str, int] = {}  # name -> number of its latest change (oldest first)
        self._records: dict[str, tuple[int, JobRecord | None]] = {}
        self._reading: dict[str, tuple[int, threading.Event]] = {}

    def changed(self, name: str) -> None:
        with self._lock:
            self._latest.pop(name, None)
            self._latest[name] = next(self._count)
            if len(self._latest) > self._keep:  # forget the jobs that changed longest ago
                for old in list(self._latest)[: len(self._latest) - self._keep // 2]:
                    del self._latest[old]
                    self._records.pop(old, None)

    def record(self, name: str) -> JobRecord | None:
        """``name``'s record, read after its latest change was heard."""
        mine: tuple[int, threading.Event] | None = None
        while True:
            with self._lock:
                latest = self._latest.get(name)
                if latest is None:  # a change this hub never heard of (or forgot): no sharing
                    break
                kept = self._records.get(name)
                if kept is not None and kept[0] == latest:
                    return kept[1]
                reading = self._reading.get(name)
                if reading is None or reading[0] != latest:
                    mine = self._reading[name] = (latest, threading.Event())
                    break
            reading[1].wait()  # another runner reads this change: take its record (or retry)
        return self._read_job(name) if mine is None else self._read_for(name, *mine)

    def _read_for(self, name: str, latest: int, done: threading.Event) -> JobRecord | None:
        """Read the job for the change ``latest``, then wake the runners waiting for it."""
        try:
            job = self._read_job(name)
            with self._lock:
                if self._latest.get(name) == latest:
                    self._records[name] = (latest, job)
            return job
        finally:
            with self._lock:
                if self._reading.get(name, (0, None))[1] is done:
                    del self._reading[name]
            done.set()


class ServiceRunner:
    """The thread of one service."""

    def __init__(self, service: ControlService, read_job: JobReader) -> None:
        self.service = service
        self._read_job = read_job
        self._pending: dict[str, None] = {}  # names in order of arrival, each once
        self._metrics: dict[str, None] = {}  # jobs that stored metric points, not yet told
        self._next_metrics = 0.0  # when the service may next be told of metric points
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(
            target=self._run, name=f"trainops-service-{service.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def job_changed(self, name: str) -> None:
        with self._cond:
            self._pending[name] = None
            self._cond.notify()

    def metrics_stored(self, name: str) -> None:
        if self.service.metrics_gap is None:
            return
        with self._cond:
            self._metrics[name] = None
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=_CLOSE_TIMEOUT_S)
        self._guard("close", self.service.close)

    def _run(self) -> None:
        period = self.service.period
        next_tick = time.monotonic()
        while True:
            with self._cond:
                while not self._closing and not self._pending:
                    wait = self._wait(next_tick if period is not None else None)
                    if wait == 0.0:
                        break
                    self._cond.wait(wait)
                if self._closing:
                    return
                names, self._pending = list(self._pending), {}
                stored: list[str] = []
                if self._metrics and time.monotonic() >= self._next_metrics:
                    stored, self._metrics = list(self._metrics), {}
            for name in names:
                self._deliver(name)
            if stored:
                self._next_metrics = time.monotonic() + (self.service.metrics_gap or 0.0)
                self._guard(
                    "metrics_stored", functools.partial(self.service.metrics_stored, stored)
                )
            if period is not None and time.monotonic() >= next_tick:
                self._guard("tick", self.service.tick)
                next_tick = time.monotonic() + period

    def _wait(self, next_tick: float | None) -> float | None:
        """How long to sleep before the next tick or telling of metric points (0: due now;
        None: until woken)."""
        due = [] if next_tick is None else [next_tick]
        if self._metrics:
            due.append(self._next_metrics)
        return max(0.0, min(due) - time.monotonic()) if due else None

    def _deliver(self, name: str) -> None:
        try:
            job = self._read_job(name)
        except Exception:
            _log.exception("service %s: reading job %s failed", self.service.name, name)
            return
        if job is not None:
            self._guard(f"job_changed({name})", lambda: self.service.job_changed(job))

    def _guard(self, what: str, call: Callable[[], None]) -> None:
        try:
            call()
        except Exception:
            _log.exception("service %s: %s failed", self.service.name, what)


class ServiceHub:
    """Every service of one control plane."""

    def __init__(self, services: list[ControlService], read_job: JobReader) -> None:
        self.services = services
        self._reads = SharedReads(read_job)
        self._runners = [ServiceRunner(service, self._reads.record) for service in services]

    def start(self) -> None:
        for runner in self._runners:
            runner.start()

    def job_changed(self, name: str) -> None:
        self._reads.changed(name)
        for runner in self._runners:
            runner.job_changed(name)

    def metrics_stored(self, name: str) -> None:
        for runner in self._runners:
            runner.metrics_stored(name)

    def close(self) -> None:
        for runner in self._runners:
            runner.close()

    def get(self, name: str) -> ControlService | None:
        return next((s for s in self.services if s.name == name), None)
