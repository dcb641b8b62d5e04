"""The monitor: liveness of agents, max runtime, and killing agents that ignore a stop.

Each tick looks at the jobs that have an agent of their current attempt that has not reported
its exit, the jobs that are stopping, and the jobs a change left half done (a write that failed
on a full disk: ``ControlCore.recheck``). Jobs that wait for capacity have no agent and nothing
a tick could find: they are the scheduler's, which works on change (a submission, capacity
freed), so a tick costs the same with none or ten thousand of them waiting. At start-up,
:meth:`Monitor.recover` looks once at every job that is not over: the recovery of a restarted
control plane, where dead agents' journals are read and the end rules applied. A host left
launching with no handle (the control plane before stopped between starting its agent and
recording it) is looked for through the backend on each tick (the agent says in its state
directory which process it is) until found, or lost once nothing of it is heard for the
heartbeat timeout.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from trainops.control._core import ControlCore, handle_of
from trainops.control._events import EventIntake
from trainops.control._lifecycle import Lifecycle, running_seconds
from trainops.control._spot import Interruptions
from trainops.control._status import PrimaryStatus, StopReason
from trainops.store import HostRecord, HostState, JobRecord

__all__ = ["Monitor", "PeriodicWorker", "StoreHealth"]

_log = logging.getLogger("trainops.control")
_ACTIVE = (PrimaryStatus.IN_PROGRESS, PrimaryStatus.STOPPING)


class StoreHealth:
    """Whether the metadata store can be written, as the last write found.

    A full disk makes every write fail ("database or disk is full"); that is logged once, not
    once a tick, and once it has lasted ``grace_seconds`` :meth:`check` raises it, so that
    clients following a job get a clear error instead of waiting for an end that cannot be
    recorded.
    """

    def __init__(self, grace_seconds: float = 5.0) -> None:
        self.grace_seconds = grace_seconds
        self._failure: sqlite3.OperationalError | None = None
        self._since = 0.0
        self._lock = threading.Lock()

    def failed(self, exc: sqlite3.OperationalError) -> None:
        with self._lock:
            if self._failure is None:
                _log.error("the metadata store cannot be written (%s); retrying until it can", exc)
                self._since = time.monotonic()
            self._failure = exc

    def succeeded(self) -> None:
        with self._lock:
            if self._failure is not None:
                _log.warning("the metadata store can be written again")
            self._failure = None

    def check(self) -> None:
        """Raise the store's failure if writes have failed for ``grace_seconds``."""
        with self._lock:
            failure, since = self._failure, self._since
        if failure is not None and time.monotonic() - since >= self.grace_seconds:
            raise failure


class Monitor:
    """One pass over the active jobs."""

    def __init__(
        self, core: ControlCore, lifecycle: Lifecycle, intake: EventIntake, health: StoreHealth
    ) -> None:
        self.core = core
        self.lifecycle = lifecycle
        self.intake = intake
        self.health = health
        self._failing: set[str] = set()  # jobs whose last check failed to write the store
        self._watch = (PrimaryStatus.STOPPING,)
        self.spot = Interruptions(core, lifecycle)

    def adopt_reservations(self) -> None:
        """After a restart: hold again the capacity of attempts whose agents may still run."""
        for job in self.core.store.active_jobs(_ACTIVE):
            hosts = self.core.store.hosts(job.name, job.attempt)
            if any(not h.exited for h in hosts):
                self.core.backend.adopt(job.name, [h.reservation for h in hosts])

    def tick(self) -> None:
        """Look at the jobs with live agents, the stopping ones and those to look at again."""
        self._take_preemptions()
        names = set(self.core.store.watched_jobs(self._watch))
        names |= self.core.take_rechecks() | self._failing | self.core.spot_jobs
        for name in sorted(names):
            self._look(name)

    def _take_preemptions(self) -> None:
        """Interrupt the spot jobs on the machines the backend says it is losing."""
        try:
            preemptions = self.core.backend.take_preemptions()
        except Exception:
            _log.exception("monitor: asking the backend for preemptions failed")
            return
        for preemption in preemptions:
            with self.core.lock:
                self.spot.preempted(preemption)

    def recover(self) -> None:
        """Look once at every job that is not over (after a restart)."""
        for job in self.core.store.active_jobs(_ACTIVE):
            if job.spec.use_spot_instances:
                self.core.spot_jobs.add(job.name)
            self._look(job.name)

    def _look(self, name: str) -> None:
        with self.core.lock:
            try:
                self._check(name)
            except sqlite3.OperationalError as exc:
                # "database or disk is full": one line while it lasts, not one traceback
                # a tick; the next tick tries again, and succeeds once there is space.
                self._failing.add(name)
                self.health.failed(exc)
                return
            except KeyError:
                pass  # the job is gone from the store
            except Exception:
                _log.exception("monitor: checking job %s failed", name)
            if name in self._failing:
                self._failing.discard(name)
                if not self._failing:
                    self.health.succeeded()

    def _check(self, name: str) -> None:
        """Liveness, max runtime and stop escalation of one job, then its end rules. The job and
        its hosts are read once; again only after something changed them."""
        job = self.core.job(name)
        hosts = self.core.store.hosts(name, job.attempt)
        changed = False
        for host in hosts:
            if not host.exited:
                changed = self._check_host(job, host) or changed
        if changed:
            job = self.core.job(name)
        changed = self._check_runtime(job) or changed
        if changed:
            job = self.core.job(name)
        if self.spot.check_max_wait(job):
            changed, job = True, self.core.job(name)
        changed = self._escalate(job) or changed
        self.lifecycle.evaluate(name, None if changed else (job, hosts))

    def _check_host(self, job: JobRecord, host: HostRecord) -> bool:
        """Whether ``host``, which has not reported its exit, was found gone (and recorded so)."""
        timeout = self.core.settings.control.heartbeat_timeout
        if host.state == HostState.LAUNCHING and not host.handle:
            return self._find_unrecorded(job, host)
        if not self.core.backend.is_alive(handle_of(host)):
            self.intake.host_gone(self.core.job(job.name), host)
            return True
        if self.core.heartbeats.silent_for(job.name, host.host, host.attempt) > timeout:
            reason = (
                f"the host agent of {host.host} sent no report for {timeout} s "
                "(agents report at least every second): the host is lost"
            )
            self.intake.host_gone(self.core.job(job.name), host, reason)
            return True
        return False

    def _find_unrecorded(self, job: JobRecord, host: HostRecord) -> bool:
        """A host whose launch was never recorded (launches are recorded under the lock this
        runs under, so only a control plane that stopped mid-launch leaves one): its agent
        found and recorded, or the host lost once none is heard from; whether either came."""
        handle = self.core.backend.find_agent(Path(host.state_dir))
        if handle is not None:
            self.core.record_agent(job.name, host.host, host.attempt, handle)
            return True
        timeout = self.core.settings.control.heartbeat_timeout
        if self.core.heartbeats.silent_for(job.name, host.host, host.attempt) <= timeout:
            return False
        reason = (
            f"the host agent of {host.host} was being started when the control plane stopped, "
            f"and nothing of it was heard for {timeout} s after: it never started"
        )
        self.intake.host_gone(self.core.job(job.name), host, reason)
        return True

    def _check_runtime(self, job: JobRecord) -> bool:
        """Begin the stop of a job past its max runtime; whether it did."""
        start = job.training_start_time
        if job.status != PrimaryStatus.IN_PROGRESS or start is None:
            return False
        if job.stop_reason not in (None, StopReason.RESTARTING):
            return False
        limit = job.spec.stopping_condition.max_runtime_in_seconds
        now = self.core.now()
        # A spot job's run time is its hosts' running time: capacity waits are max wait's.
        ran = running_seconds(job, now) if job.spec.use_spot_instances else now - start
        if ran < limit:
            return False
        message = f"Stopping: the job exceeded MaxRuntimeInSeconds ({limit} s)"
        self.lifecycle.begin_stop(job, StopReason.MAX_RUNTIME_EXCEEDED, message)
        return True

    def _escalate(self, job: JobRecord) -> bool:
        """Kill agents still running ``grace + kill margin`` after they were told to stop;
        whether any was."""
        if job.stop_requested_at is None:
            return False
        grace = job.spec.grace_seconds
        if job.stop_reason == StopReason.INTERRUPTED and job.spot_notice is not None:
            grace = job.spot_notice
        deadline = job.stop_requested_at + grace + self.core.config.kill_margin_seconds
        if self.core.now() < deadline:
            return False
        killed = False
        for host in self.core.store.hosts(job.name, job.attempt):
            if not host.exited:
                _log.warning("killing the agent of %s/%s: it ignored a stop", job.name, host.host)
                self.core.backend.kill(handle_of(host))
                self.intake.host_gone(job, host)
                killed = True
        return killed


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
