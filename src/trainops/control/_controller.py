"""The job controller: the one object the server talks to.

It takes submissions and stop requests from the public API and reports from agents, runs the
scheduler (placing waiting jobs) and the monitor (liveness, max runtime, stop escalation) on
threads of their own, and on start recovers whatever a previous control plane left running.
"""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Sequence

from trainops._errors import JobNotFoundError, SpecError, StorageError
from trainops._settings import Settings
from trainops.agent.launchers import available_launchers
from trainops.backends import Backend
from trainops.control._core import ControlCore, ControllerConfig
from trainops.control._events import EventIntake
from trainops.control._lifecycle import Lifecycle
from trainops.control._monitor import Monitor, PeriodicWorker, StoreHealth
from trainops.control._placement import Placement, token_hash
from trainops.control._retention import TreeRetention
from trainops.control._status import (
    ENDED,
    STARTING_MESSAGE,
    AgentAuthError,
    JobEndedError,
    PrimaryStatus,
    SecondaryStatus,
    StopReason,
)
from trainops.protocol import AgentEvent, Assignment, EventReply, HostResources
from trainops.spec import JobSpec, check_job_name
from trainops.storage import join_uri, store_for
from trainops.store import HostRecord, JobRecord, MetadataStore

__all__ = ["JobController"]

_SCHEDULER_PERIOD_S = 1.0
_RETENTION_PERIOD_S = 60.0


class JobController:
    """Runs training jobs on ``backend``, keeping their records in ``store``."""

    def __init__(
        self,
        settings: Settings,
        store: MetadataStore,
        backend: Backend,
        config: ControllerConfig | None = None,
    ) -> None:
        self.core = ControlCore(settings, store, backend, config or ControllerConfig())
        self.lifecycle = Lifecycle(self.core)
        self.intake = EventIntake(self.core, self.lifecycle)
        self.placement = Placement(self.core, self.lifecycle)
        self.health = StoreHealth()
        self.monitor = Monitor(self.core, self.lifecycle, self.intake, self.health)
        self._scheduler = PeriodicWorker("trainops-scheduler", _SCHEDULER_PERIOD_S, self._schedule)
        self._monitor = PeriodicWorker(
            "trainops-monitor", self.core.config.tick_seconds, self._tick
        )
        self.core.wake_scheduler = self._scheduler.wake
        self.retention = TreeRetention(self.core)
        self._retention = PeriodicWorker(
            "trainops-retention", _RETENTION_PERIOD_S, self._sweep_trees
        )

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def store(self) -> MetadataStore:
        return self.core.store

    @property
    def backend(self) -> Backend:
        return self.core.backend

    def start(self, server_url: str) -> None:
        """Recover what a previous control plane left, then start the scheduler and monitor.

        ``server_url`` is where agents reach this control plane's agent API.
        """
        self.core.server_url = server_url
        self.backend.open()
        with self.core.lock:
            self.monitor.adopt_reservations()
        self.monitor.tick()
        self._scheduler.start()
        self._monitor.start()
        self._retention.start()

    def close(self) -> None:
        """Stop the threads and release waiters; agents keep running (a later start adopts them)."""
        self.core.close_waiters()
        self._scheduler.stop()
        self._monitor.stop()
        self._retention.stop()
        self.backend.close()

    def _schedule(self) -> None:
        with self.core.lock:
            self.placement.place_waiting()

    def _tick(self) -> None:
        self.monitor.tick()

    def _sweep_trees(self) -> None:
        self.retention.sweep()

    # --- public API ---------------------------------------------------------------------------

    def submit(self, job_name: str, spec: JobSpec, code_uri: str) -> JobRecord:
        """Record a new job (InProgress/Starting); the scheduler starts it when it fits."""
        check_job_name(job_name)
        _check_launcher(spec)
        self._check_code(code_uri)
        output = spec.output_path or self.settings.default_output_uri
        job = self.store.create_job(
            name=job_name,
            spec=spec.view(),
            code_uri=code_uri,
            output_prefix=join_uri(output, job_name),
            max_attempts=1 + spec.retry_strategy.maximum_retry_attempts,
            status=PrimaryStatus.IN_PROGRESS,
            secondary_status=SecondaryStatus.STARTING,
            message=STARTING_MESSAGE,
            now=self.core.now(),
        )
        self.core.notify()
        self._scheduler.wake()
        return job

    def stop(self, job_name: str) -> JobRecord:
        """Ask every host to stop; the job ends Stopped when they are down."""
        with self.core.lock:
            job = self.job(job_name)
            if job.status in ENDED:
                raise JobEndedError(f"job {job_name!r} has already ended ({job.status})")
            self.lifecycle.begin_stop(job, StopReason.STOPPED, "Stop requested by the user")
            return self.job(job_name)

    def job(self, name: str) -> JobRecord:
        """The job's record; raises the store's failure once writes have failed for a while
        (a full disk), since the job cannot move on until they succeed again."""
        self.health.check()
        job = self.store.get_job(name)
        if job is None:
            raise JobNotFoundError(f"no job named {name!r}")
        return job

    def wait_for_change(self, since: int, timeout: float) -> int:
        return self.core.wait_for_change(since, timeout)

    @property
    def change_version(self) -> int:
        return self.core.version

    @property
    def closing(self) -> bool:
        """True once :meth:`close` began: waiters should answer now."""
        return self.core.closing

    def _check_code(self, code_uri: str) -> None:
        try:
            found = store_for(code_uri, self.settings).exists(code_uri)
        except StorageError as exc:
            raise SpecError([("code_uri", str(exc))]) from None
        if not found:
            raise SpecError([("code_uri", f"no object at {code_uri}: upload the code first")])

    # --- agent API ----------------------------------------------------------------------------

    def assignment(self, job_name: str, host: str, attempt: int, token: str) -> Assignment:
        job, record = self._authorize(job_name, host, attempt, token)
        hosts = self.store.hosts(job_name, attempt)
        return Assignment(
            job_name=job.name,
            attempt=attempt,
            current_host=host,
            hosts=[h.host for h in hosts],
            spec=job.spec,
            code_uri=job.code_uri,
            output_prefix=job.output_prefix,
            resources=HostResources(**record.resources),
            region=self.settings.region,
        )

    def report(
        self, job_name: str, host: str, attempt: int, token: str, events: Sequence[AgentEvent]
    ) -> EventReply:
        """Store an agent's events; the reply acknowledges them and carries its commands."""
        self._authorize(job_name, host, attempt, token)
        with self.core.lock:
            record = self.store.host(job_name, host, attempt)
            if record is None:
                raise AgentAuthError(f"job {job_name!r} has no host {host} in attempt {attempt}")
            try:
                acked = self.intake.ingest(record, events)
            except sqlite3.OperationalError as exc:
                self.health.failed(exc)
                raise
            self.health.succeeded()
            job = self.job(job_name)
            record = self.store.host(job_name, host, attempt) or record
            return EventReply(acked_seq=acked, commands=self.intake.commands_for(job, record))

    def _authorize(
        self, job_name: str, host: str, attempt: int, token: str
    ) -> tuple[JobRecord, HostRecord]:
        job = self.store.get_job(job_name)
        expected = job.agent_token_hash if job is not None else None
        if job is None or expected is None or not hmac.compare_digest(token_hash(token), expected):
            raise AgentAuthError("missing or wrong agent token")
        record = self.store.host(job_name, host, attempt)
        if record is None:
            raise AgentAuthError(f"job {job_name!r} has no host {host} in attempt {attempt}")
        return job, record


def _check_launcher(spec: JobSpec) -> None:
    """Refuse a distribution whose launcher the host agents cannot start (yet)."""
    launcher = spec.view().distribution.launcher
    available = available_launchers()
    if launcher not in available:
        raise SpecError(
            [
                (
                    f"distribution.{launcher}",
                    f"this trainops cannot launch {launcher} yet; available: "
                    + ", ".join(sorted(available)),
                )
            ]
        )
