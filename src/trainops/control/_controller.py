"""The job controller: the one object the server talks to.

It takes submissions and stop requests from the public API and reports from agents, runs the
scheduler (placing waiting jobs) and the monitor (liveness, max runtime, stop escalation) on
threads of their own, and on start recovers whatever a previous control plane left running.
"""

from __future__ import annotations

import hmac
import posixpath
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from trainops._errors import JobNotFoundError, SpecError, StorageError, TrainopsError
from trainops._settings import Settings
from trainops.agent.launchers import available_launchers, launcher_for
from trainops.backends import Backend
from trainops.control._core import ControlCore, ControllerConfig
from trainops.control._credentials import JobCredentials
from trainops.control._events import EventIntake
from trainops.control._lifecycle import Lifecycle
from trainops.control._monitor import Monitor, PeriodicWorker, StoreHealth
from trainops.control._placement import Placement, host_assignment, token_hash
from trainops.control._relay import Spawn, SpawnRelay
from trainops.control._retention import TreeRetention
from trainops.control._rules_update import with_rules
from trainops.control._status import (
    ENDED,
    STARTING_MESSAGE,
    AgentAuthError,
    JobEndedError,
    PrimaryStatus,
    SecondaryStatus,
    StopReason,
)
from trainops.control.services import (
    SERVICES,
    ControlService,
    RetentionService,
    ServiceContext,
    ServiceHub,
)
from trainops.protocol import (
    AgentEvent,
    Assignment,
    EventReply,
    SpawnState,
    SubmittedJob,
)
from trainops.spec import JobSpec, check_job_name
from trainops.storage import join_uri, store_for
from trainops.store import AgentCredential, HostRecord, HostState, JobRecord, MetadataStore

__all__ = ["JobController"]

_REFUSED_AGENT = (
    "missing, wrong or revoked agent token: each token speaks for one host of one attempt of "
    "one job, until that host or the job ends"
)
_NO_CHECKPOINT = (
    "use_spot_instances without checkpoint: every interruption restarts the script from "
    "scratch, losing all the work done so far (and paying for it again); give checkpoint.uri "
    "and have the script save to and resume from /opt/ml/checkpoints"
)
_SCHEDULER_PERIOD_S = 1.0
_UNFINISHED = (PrimaryStatus.IN_PROGRESS, PrimaryStatus.STOPPING)
_ACTION_POLL_S = 0.2
# How long a host may take to pick a command action up, besides its own timeout.
_ACTION_DELIVERY_S = 15.0


class JobController:
    """Runs training jobs on ``backend``, keeping their records in ``store``."""

    def __init__(
        self,
        settings: Settings,
        store: MetadataStore,
        backend: Backend,
        config: ControllerConfig | None = None,
        credentials: JobCredentials | None = None,
    ) -> None:
        self.core = ControlCore(settings, store, backend, config or ControllerConfig())
        self.core.credentials = credentials
        self.lifecycle = Lifecycle(self.core)
        self.intake = EventIntake(self.core, self.lifecycle)
        self.placement = Placement(self.core, self.lifecycle)
        self.health = StoreHealth()
        self.spawns = SpawnRelay()
        self.monitor = Monitor(self.core, self.lifecycle, self.intake, self.health)
        self._scheduler = PeriodicWorker("trainops-scheduler", _SCHEDULER_PERIOD_S, self._schedule)
        self._monitor = PeriodicWorker(
            "trainops-monitor", self.core.config.tick_seconds, self._tick
        )
        self.core.wake_scheduler = self._scheduler.wake
        self.retention = TreeRetention(self.core)
        self.services = ServiceHub(self._make_services(), self.store.get_job)
        self.core.job_listener = self.services.job_changed
        self.core.metrics_listener = self.services.metrics_stored

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
            self.placement.load_waiting()
        self.monitor.recover()
        if self.core.credentials is not None:  # jobs that ended while no control plane ran
            self.core.credentials.retain(self.store.watched_jobs(_UNFINISHED))
        self._scheduler.start()
        self._monitor.start()
        self.services.start()

    def close(self) -> None:
        """Stop the threads and release waiters; agents keep running (a later start adopts them)."""
        self.core.close_waiters()
        self._scheduler.stop()
        self._monitor.stop()
        self.services.close()
        self.backend.close()

    def _schedule(self) -> None:
        with self.core.lock:
            self.placement.place_waiting()

    def _tick(self) -> None:
        self.monitor.tick()

    def _make_services(self) -> list[ControlService]:
        context = ServiceContext(
            store=self.store,
            settings=self.settings,
            stop_job=self._stop_for_service,
            now=self.core.now,
            run_on_host=self.run_on_host,
            submit_job=self.submit,
            interrupt_job=self.interrupt,
        )
        made = [factory(context) for factory in SERVICES.values()]
        return [RetentionService(self.retention), *(s for s in made if s is not None)]

    def _stop_for_service(self, job_name: str, message: str) -> bool:
        """A service's stop (a rule's action): like the user's, with the service's reason."""
        with self.core.lock:
            job = self.store.get_job(job_name)
            if job is None or job.status in ENDED or job.stop_reason:
                return False
            self.lifecycle.begin_stop(job, StopReason.STOPPED, message)
            return True

    # --- public API ---------------------------------------------------------------------------

    def submit(
        self,
        job_name: str,
        spec: JobSpec,
        code_uri: str,
        *,
        with_job: Callable[[JobRecord], None] | None = None,
    ) -> JobRecord:
        """Record a new job (InProgress/Starting); the scheduler starts it when it fits.

        ``with_job`` runs inside the transaction that records the job: what it writes to the
        store (the API's tags, its kept request) is kept with the job or, if it raises, neither
        is (the error goes on to the caller). It must not wait on another thread."""
        view, output = self._checked(job_name, spec, code_uri)
        with self.store.transaction():
            job = self.store.create_job(
                name=job_name,
                spec=view,
                code_uri=code_uri,
                output_prefix=join_uri(output, job_name),
                max_attempts=1 + spec.retry_strategy.maximum_retry_attempts,
                status=PrimaryStatus.IN_PROGRESS,
                secondary_status=SecondaryStatus.STARTING,
                message=STARTING_MESSAGE,
                now=self.core.now(),
            )
            if with_job is not None:
                with_job(job)
        if spec.use_spot_instances:
            self.core.spot_jobs.add(job.name)
        self.core.waiting.add(job)
        self.core.notify()
        self.core.job_listener(job.name)
        self._scheduler.wake()
        return job

    def _checked(self, job_name: str, spec: JobSpec, code_uri: str) -> tuple[SubmittedJob, str]:
        """The typed view of a job that may be recorded and its output URI (:class:`SpecError`
        if it may not); the view is made once, for the checks and the store."""
        check_job_name(job_name)
        view = spec.view()
        _check_launcher(view)
        _check_python(spec, self.settings)
        if code_uri or spec.container_entrypoint is None:  # a command may come with no code
            self.check_code(code_uri)
        output = spec.output_path or self.settings.default_output_uri
        if self.backend.spans_machines:
            _check_shared_storage(spec, code_uri, output, self.settings.shared_paths)
        return view, output

    def submission_warnings(self, spec: JobSpec) -> list[str]:
        """What a job of ``spec`` will not get where the backend runs it (private namespaces,
        /opt/ml) and the SageMaker SDK arguments it gave that have no effect here, one line
        each; the backend asks its machines once and keeps the answer."""
        try:
            note = self.backend.containment_note(spec.mount_opt_ml)
        except (TrainopsError, OSError) as exc:  # never a reason to refuse the job
            note = f"cannot tell whether the job's hosts get private namespaces here: {exc}"
        notes = list(spec.sagemaker_notes) + ([] if note is None else [note])
        if spec.use_spot_instances and spec.checkpoint is None:
            notes.append(_NO_CHECKPOINT)
        return notes

    def stop(self, job_name: str) -> JobRecord:
        """Ask every host to stop; the job ends Stopped when they are down."""
        with self.core.lock:
            job = self.job(job_name)
            if job.status in ENDED:
                raise JobEndedError(f"job {job_name!r} has already ended ({job.status})")
            self.lifecycle.begin_stop(job, StopReason.STOPPED, "Stop requested by the user")
            return self.job(job_name)

    def add_rules(self, job_name: str, rules: Sequence[Mapping[str, Any]]) -> JobRecord:
        """Add ``rules`` (the spec's rule fields) to a job that has not ended; the rules
        services evaluate them from their next tick. :class:`SpecError` for rules the job
        cannot take (a name it has, profiler rules on a job without the profiler)."""
        with self.core.lock:
            job = self.job(job_name)
            if job.status in ENDED:
                raise JobEndedError(f"job {job_name!r} has already ended ({job.status})")
            spec = with_rules(job.spec, rules)
            updated = self.store.update_spec(job.name, spec, self.core.now())
            self.core.notify()
            self.core.job_listener(job.name)
            return updated

    def interrupt(
        self,
        job_name: str,
        *,
        hosts: Sequence[str] | None = None,
        source: str,
        message: str = "",
        capacity_gap_seconds: float = 0.0,
        notice_seconds: float | None = None,
    ) -> JobRecord:
        """Interrupt a running spot job as spot capacity being reclaimed would: every host of
        its current attempt gets an interrupted stop with ``notice_seconds`` of notice (the
        spec's grace period where None; one host's interruption interrupts the job), then the
        job waits ``capacity_gap_seconds`` in Pending and starts again as a new attempt.
        Refuses (:class:`TrainopsError`) a job that is not a spot job in Downloading or
        Training."""
        with self.core.lock:
            self.health.check()
            return self.monitor.spot.interrupt(
                job_name,
                hosts=hosts,
                source=source,
                message=message,
                capacity_gap_seconds=capacity_gap_seconds,
                notice_seconds=notice_seconds,
            )

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

    def check_code(self, code_uri: str) -> None:
        """Refuse a ``code_uri`` with no object behind it (:class:`SpecError` on ``code_uri``)."""
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
        return host_assignment(self.core, job, attempt, host, record.resources, hosts)

    def report(
        self, job_name: str, host: str, attempt: int, token: str, events: Sequence[AgentEvent]
    ) -> EventReply:
        """Store an agent's events; the reply acknowledges them and carries its commands."""
        # The token, and that host and job live on (as _authorize), without reading the job and
        # host records that _authorize returns: they are read below, under the lock, and this
        # runs twice a second for every running host.
        self.authenticate(job_name, host, token, attempt)
        self.core.heartbeats.heard(job_name, host, attempt)
        with self.core.lock:
            record = self.store.host(job_name, host, attempt)
            if record is None or record.exited:  # it ended since: its token is revoked
                raise AgentAuthError(_REFUSED_AGENT)
            try:
                acked = self.intake.ingest(record, events)
            except sqlite3.OperationalError as exc:
                self.health.failed(exc)
                self.core.recheck(job_name)  # its events may be in, their consequences not
                raise
            self.health.succeeded()
            job = self.job(job_name)
            record = self.store.host(job_name, host, attempt) or record
            commands = self.intake.commands_for(job, record)
        if not commands and not record.exited:
            commands = self.spawns.commands_for(job_name, attempt, host)
            commands += self.core.host_actions.commands_for(job_name, attempt, host)
        return EventReply(acked_seq=acked, commands=commands)

    # --- rules' command actions, run on the job's first host (see _host_actions) --------------

    def run_on_host(
        self, job_name: str, argv: list[str], stdin: str, variables: dict[str, str], timeout: float
    ) -> dict[str, Any] | str:
        """Run a rule's command action on the job's first host and wait for how it went: the
        host's ``action`` event (its ``data``, with ``host``), or, where no host took it, the
        reason (the caller then runs it itself, with the job's recorded environment)."""
        target = self._action_host(job_name, starting=True)
        if isinstance(target, str):
            return target
        host = target.host
        try:
            action = self.core.host_actions.open(
                job_name, target.attempt, host, argv, stdin, variables, timeout
            )
        except ValueError as exc:
            return str(exc)
        deadline = time.monotonic() + timeout + _ACTION_DELIVERY_S
        reason = ""
        while not action.wait(_ACTION_POLL_S):
            gone = self._action_host(job_name, starting=False)
            if isinstance(gone, str) or self.core.closing:
                reason = gone if isinstance(gone, str) else "the control plane is closing"
                break
            if time.monotonic() > deadline:
                reason = f"host {host} did not report it within {timeout + _ACTION_DELIVERY_S:g} s"
                break
        delivered = self.core.host_actions.close(action)
        if action.outcome is not None and action.outcome.get("declined") is True:
            return f"host {host} is not running the job's script"  # nothing ran there
        if action.outcome is not None:
            return {**action.outcome, "host": host}
        if not delivered:
            return reason
        return {"host": host, "ran": False, "error": f"host {host} took it, then: {reason}"}

    def _action_host(self, job_name: str, *, starting: bool) -> HostRecord | str:
        """The running first host of the job's current attempt, or why there is none (a host
        that has taken an action still counts while the job stops: ``starting`` is False)."""
        job = self.store.get_job(job_name)
        if job is None or job.status in ENDED:
            return "the job's hosts have ended"
        if starting and job.stop_reason:
            return "the job is stopping"
        hosts = self.store.hosts(job_name, job.attempt)
        first = next((h for h in hosts if h.host == "algo-1"), hosts[0] if hosts else None)
        if first is None:
            return "the job has no host yet"
        if first.exited:
            return f"host {first.host} has ended"
        return first

    # --- remote commands between the hosts of a job (see _relay) ------------------------------

    def open_spawn(
        self, job_name: str, host: str, attempt: int, token: str, target: str, words: list[str]
    ) -> dict[str, Any]:
        """Ask ``target`` (a host of the same job and attempt) to run ``words``."""
        job, _ = self._authorize(job_name, host, attempt, token)
        self._check_running(job, attempt)
        record = self.store.host(job_name, target, attempt)
        if record is None:
            raise TrainopsError(f"job {job_name!r} has no host {target!r} in attempt {attempt}")
        if record.exited:
            raise JobEndedError(f"host {target} of job {job_name!r} has already ended")
        try:
            spawn = self.spawns.open(job_name, attempt, host, target, words)
        except ValueError as exc:
            raise TrainopsError(f"remote command for {target}: {exc}") from None
        return spawn.to_json()

    def spawn_status(
        self, job_name: str, host: str, attempt: int, token: str, spawn_id: str
    ) -> dict[str, Any]:
        """Where a spawn stands; one whose job (or target host) has ended meanwhile fails."""
        job, _ = self._authorize(job_name, host, attempt, token)
        spawn = self._spawn(job_name, attempt, spawn_id)
        if host not in (spawn.source, spawn.target):
            raise AgentAuthError(f"remote command {spawn_id} is not {host}'s")
        if job.status in ENDED or job.attempt != attempt or job.stop_reason:
            self.spawns.update(spawn, SpawnState.FAILED, None, "the job has ended")
        else:
            target = self.store.host(job_name, spawn.target, attempt)
            if target is not None and target.exited and spawn.state is SpawnState.PENDING:
                reason = f"host {spawn.target} ended before it ran the command"
                self.spawns.update(spawn, SpawnState.FAILED, None, reason)
        return spawn.to_json()

    def report_spawn(
        self,
        job_name: str,
        host: str,
        attempt: int,
        token: str,
        spawn_id: str,
        state: SpawnState,
        exit_code: int | None,
        error: str | None,
    ) -> dict[str, Any]:
        """The target host says how a spawn went."""
        self._authorize(job_name, host, attempt, token)
        spawn = self._spawn(job_name, attempt, spawn_id)
        if spawn.target != host:
            raise AgentAuthError(f"remote command {spawn_id} is not for host {host}")
        if state is SpawnState.PENDING:
            raise TrainopsError("a host reports a remote command started, exited or failed")
        self.spawns.update(spawn, state, exit_code, error)
        return spawn.to_json()

    def _spawn(self, job_name: str, attempt: int, spawn_id: str) -> Spawn:
        spawn = self.spawns.get(job_name, attempt, spawn_id)
        if spawn is None:
            raise JobNotFoundError(f"job {job_name!r} has no remote command {spawn_id!r}")
        return spawn

    def _check_running(self, job: JobRecord, attempt: int) -> None:
        if job.status in ENDED or job.attempt != attempt or job.stop_reason:
            raise JobEndedError(f"job {job.name!r} is ending; it starts no remote command")

    def authenticate(
        self, job_name: str, host: str, token: str, attempt: int | None = None
    ) -> None:
        """Check an agent's credential (cheaply, before its request's body is read).

        ``token`` must be the token of ``host`` of the job's ``attempt`` (the current attempt
        when ``None``), and that host and its job must not have ended: a token speaks for one
        host of one attempt, and is revoked when either ends. Raises :class:`AgentAuthError`.
        """
        if not _credential_holds(self.store.agent_credential(job_name, host, attempt), token):
            raise AgentAuthError(_REFUSED_AGENT)

    def _authorize(
        self, job_name: str, host: str, attempt: int, token: str
    ) -> tuple[JobRecord, HostRecord]:
        self.authenticate(job_name, host, token, attempt)
        job = self.store.get_job(job_name)
        record = self.store.host(job_name, host, attempt)
        if job is None or record is None:
            raise AgentAuthError(_REFUSED_AGENT)
        self.core.heartbeats.heard(job_name, host, attempt)
        return job, record


def _credential_holds(credential: AgentCredential | None, token: str) -> bool:
    """Whether ``token`` is the live token of the host ``credential`` describes."""
    if credential is None or credential.token_hash is None:
        return False
    live = (
        credential.state != HostState.EXITED
        and credential.status not in ENDED
        and credential.attempt == credential.job_attempt
    )
    return hmac.compare_digest(token_hash(token), credential.token_hash) and live


def _check_shared_storage(
    spec: JobSpec, code_uri: str, output: str, shared: tuple[str, ...]
) -> None:
    """Refuse ``file://`` URIs the machines of a multi-machine backend cannot all read."""
    uris = [("code_uri", code_uri), ("output_path", output)]
    uris += [
        (f"inputs.{name}.uri", channel.uri)
        for name, channel in spec.inputs.items()
        if channel.uri is not None  # a file_system channel is shared by definition
    ]
    if spec.checkpoint is not None:
        uris.append(("checkpoint.uri", spec.checkpoint.uri))
    for name in ("profiler_config", "tensorboard_output_config"):
        config = getattr(spec, name)
        if config is not None and config.s3_output_path is not None:
            uris.append((f"{name}.s3_output_path", config.s3_output_path))
    problems = [
        (
            field,
            f"{uri} is on this machine's disk, but the {_shared_reason(shared)}",
        )
        for field, uri in uris
        if uri.startswith("file://") and not _under_shared(uri, shared)
    ]
    if problems:
        raise SpecError(problems)


def _shared_reason(shared: tuple[str, ...]) -> str:
    where = f"a folder of shared_paths ({', '.join(shared)})" if shared else "shared_paths"
    return (
        "backend runs hosts on other machines, which cannot read it: use s3:// (or a file:// "
        f"URI under {where})"
    )


def _under_shared(uri: str, shared: tuple[str, ...]) -> bool:
    path = PurePosixPath(posixpath.normpath(unquote(urlsplit(uri).path)))  # no "..": its real place
    return any(
        path == PurePosixPath(root) or PurePosixPath(root) in path.parents for root in shared
    )


def _check_python(spec: JobSpec, settings: Settings) -> None:
    """A job's ``python`` must be one the server's ``images`` setting names: the agent runs it
    outside the job's sandbox to make its environment, so a job may not choose any program."""
    if spec.python is None:
        return
    allowed = sorted({m.python for m in settings.server.images if m.python.startswith("/")})
    if spec.python not in allowed:
        named = ", ".join(allowed) if allowed else "none"
        raise SpecError(
            [
                (
                    "python",
                    f"{spec.python[:200]!r} is not an interpreter the server's images setting "
                    f"names (it names {named[:400]}); leave python out to use the agent's own",
                )
            ]
        )


def _check_launcher(view: SubmittedJob) -> None:
    """Refuse a distribution whose launcher the host agents cannot start (yet)."""
    launcher = view.distribution.launcher
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
    limit = launcher_for(launcher).max_hosts
    if limit is not None and view.instance_count > limit:
        reason = f"the {launcher} launcher spans at most {limit} host(s) so far"
        raise SpecError(
            [(f"distribution.{launcher}", f"{reason}; instance_count is {view.instance_count}")]
        )
