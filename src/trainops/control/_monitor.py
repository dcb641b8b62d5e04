"""The monitor: liveness of agents, max runtime, and killing agents that ignore a stop.

Each tick looks at every job that is running, stopping, or still has an agent of its current
attempt that has not reported its exit. The same pass, run once at start-up, is the recovery of
a restarted control plane: dead agents' journals are read and the end rules applied.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from trainops.control._core import ControlCore, handle_of
from trainops.control._events import EventIntake
from trainops.control._lifecycle import Lifecycle
from trainops.control._status import PrimaryStatus, StopReason
from trainops.store import JobRecord

__all__ = ["Monitor", "PeriodicWorker"]

_log = logging.getLogger("trainops.control")
_ACTIVE = (PrimaryStatus.IN_PROGRESS, PrimaryStatus.STOPPING)


class Monitor:
    """One pass over the active jobs."""

    def __init__(self, core: ControlCore, lifecycle: Lifecycle, intake: EventIntake) -> None:
        self.core = core
        self.lifecycle = lifecycle
        self.intake = intake

    def adopt_reservations(self) -> None:
        """After a restart: hold again the capacity of attempts whose agents may still run."""
        for job in self.core.store.active_jobs(_ACTIVE):
            hosts = self.core.store.hosts(job.name, job.attempt)
            if any(not h.exited for h in hosts):
                self.core.backend.adopt(job.name, [h.reservation for h in hosts])

    def tick(self) -> None:
        for job in self.core.store.active_jobs(_ACTIVE):
            with self.core.lock:
                try:
                    self._check(job.name)
                except Exception:
                    _log.exception("monitor: checking job %s failed", job.name)

    def _check(self, name: str) -> None:
        job = self.core.job(name)
        for host in self.core.store.hosts(name, job.attempt):
            if not host.exited and not self.core.backend.is_alive(handle_of(host)):
                self.intake.host_gone(self.core.job(name), host)
        job = self.core.job(name)
        self._check_runtime(job)
        self._escalate(self.core.job(name))
        self.lifecycle.evaluate(name)

    def _check_runtime(self, job: JobRecord) -> None:
        start = job.training_start_time
        if job.status != PrimaryStatus.IN_PROGRESS or start is None:
            return
        if job.stop_reason not in (None, StopReason.RESTARTING):
            return
        limit = job.spec["stopping_condition"]["max_runtime_in_seconds"]
        if self.core.now() - start >= limit:
            message = f"Stopping: the job exceeded MaxRuntimeInSeconds ({limit} s)"
            self.lifecycle.begin_stop(job, StopReason.MAX_RUNTIME_EXCEEDED, message)

    def _escalate(self, job: JobRecord) -> None:
        """Kill agents still running ``grace + kill margin`` after they were told to stop."""
        if job.stop_requested_at is None:
            return
        grace = job.spec["stopping_condition"]["grace_period_in_seconds"]
        deadline = job.stop_requested_at + grace + self.core.config.kill_margin_seconds
        if self.core.now() < deadline:
            return
        for host in self.core.store.hosts(job.name, job.attempt):
            if not host.exited:
                _log.warning("killing the agent of %s/%s: it ignored a stop", job.name, host.host)
                self.core.backend.kill(handle_of(host))
                self.intake.host_gone(job, host)


class PeriodicWorker:
    """A daemon thread that runs ``action`` every ``period`` seconds, or sooner when woken."""

    def __init__(self, name: str, period: float, action: Callable[[], None]) -> None:
        self._action = action
        self._period = period
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._action()
            except Exception:
                _log.exception("%s: pass failed", self._thread.name)
            self._wake.wait(self._period)
            self._wake.clear()
