"""What the parts of the control plane share: store, backend, settings, one lock, one clock.

Every change of a job's state happens under ``lock``, so two agents reporting at once (or an
agent and the monitor) can never both decide how a job ends. Readers that wait for news (log
long-polls) watch a version counter that moves on every new log line and status change.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainops._settings import Settings
from trainops.backends import AgentHandle, Backend, ProcessRef
from trainops.control._credentials import JobCredentials
from trainops.control._heartbeats import Heartbeats
from trainops.control._host_actions import HostActions
from trainops.control._queue import WaitingQueue
from trainops.store import HostRecord, HostState, JobRecord, MetadataStore

__all__ = ["ControlCore", "ControllerConfig", "handle_of"]


@dataclass(frozen=True, kw_only=True)
class ControllerConfig:
    """Timings of the control plane.

    ``tick_seconds``: how often the monitor checks liveness, max runtime and stop escalation of
    the jobs whose agents run (0.5 s: an agent that died is noticed within it; what agents
    report, their exits first, is acted on when it arrives, not at a tick).
    ``kill_margin_seconds``: how long after a stop's grace period an agent that has not exited
    is killed through the backend (the agent itself kills its processes at the end of grace).
    """

    tick_seconds: float = 0.5
    kill_margin_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.tick_seconds <= 0 or self.kill_margin_seconds < 0:
            raise ValueError("tick_seconds must be > 0 and kill_margin_seconds >= 0")


class ControlCore:
    """Shared state of one control plane."""

    def __init__(
        self, settings: Settings, store: MetadataStore, backend: Backend, config: ControllerConfig
    ) -> None:
        self.settings = settings
        self.store = store
        self.backend = backend
        self.config = config
        self.lock = threading.RLock()
        self.server_url = ""
        self.wake_scheduler: Callable[[], None] = lambda: None
        # Hears the name of each job whose record changed (the services' hub); never blocks.
        self.job_listener: Callable[[str], None] = lambda name: None
        # Hears the name of each job that stored new metric points (the services' hub, for the
        # services that judge a running job's metrics, e.g. the tuner); never blocks.
        self.metrics_listener: Callable[[str], None] = lambda name: None
        self.heartbeats = Heartbeats()
        self.waiting = WaitingQueue()  # jobs to place (see _queue); the scheduler drains it
        self._recheck: set[str] = set()  # jobs the monitor must look at again (see recheck)
        self._recheck_lock = threading.Lock()
        self.host_actions = HostActions()  # rules' command actions for the jobs' hosts
        # Issues each job's own object-storage key, where the store can (see _credentials).
        self.credentials: JobCredentials | None = None
        # Spot jobs not yet ended: the monitor checks their max wait on every tick, whether or
        # not their hosts run (a job waiting for capacity has none).
        self.spot_jobs: set[str] = set()
        # When a failed host's first rank failed, by its own clock (its exit event's
        # failed_at), per (job, attempt, host): the job's failure is the earliest's. In memory
        # until the job ends; a restart in between leaves the hosts' end times to order them.
        self.failure_times: dict[tuple[str, int, str], float] = {}
        self._changed = threading.Condition()
        self._version = 0
        self._closing = False

    @staticmethod
    def now() -> float:
        return time.time()

    def job(self, name: str) -> JobRecord:
        job = self.store.get_job(name)
        if job is None:
            raise KeyError(name)
        return job

    def set_secondary(
        self,
        job: JobRecord,
        secondary: str,
        message: str,
        /,
        *,
        final: bool = False,
        at: float | None = None,
        **fields: Any,
    ) -> JobRecord:
        """Record a secondary-status transition (and any job fields) and wake the waiters.

        ``at`` is when it happened, if earlier than now (a host's own timestamp); it is clamped
        so transitions stay in order.
        """
        now = self.now()
        when = now if at is None else min(now, max(at, job.last_modified_time))
        updated = self.store.set_secondary(
            job.name, secondary, message, when, final=final, **fields
        )
        self.notify()
        self.job_listener(job.name)
        return updated

    def update_job(self, job: JobRecord, **fields: Any) -> JobRecord:
        updated = self.store.update_job(job.name, self.now(), **fields)
        self.notify()
        self.job_listener(job.name)
        return updated

    def record_agent(self, job: str, host: str, attempt: int, handle: AgentHandle) -> None:
        """The agent of ``host`` runs: its handle and the machine it is on, on the host's record."""
        self.store.update_host(
            job,
            host,
            attempt,
            state=HostState.RUNNING,
            handle=handle.to_json(),
            node=self.backend.node_of(handle),
        )

    def recheck(self, name: str) -> None:
        """Have the monitor look at ``name`` on its next ticks until a look succeeds: a change
        whose consequences could not be written (a full disk) is finished there."""
        with self._recheck_lock:
            self._recheck.add(name)

    def take_rechecks(self) -> set[str]:
        with self._recheck_lock:
            taken, self._recheck = self._recheck, set()
            return taken

    # --- waiting for news -------------------------------------------------------------------

    def notify(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    @property
    def version(self) -> int:
        with self._changed:
            return self._version

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until the version moves past ``since`` (or timeout, or shutdown)."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != since or self._closing, timeout)
            return self._version

    @property
    def closing(self) -> bool:
        return self._closing

    def close_waiters(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()


def handle_of(host: HostRecord) -> AgentHandle:
    """The backend handle of a host's agent, with the workloads it reported."""
    workloads = tuple(
        ProcessRef(int(p["pid"]), int(p["pgid"]), float(p["create_time"])) for p in host.processes
    )
    return AgentHandle(dict(host.handle or {}), workloads)
