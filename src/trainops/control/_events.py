"""Taking in what agents report, live over HTTP or afterwards from their journals.

The store keeps each event once; this module adds what the events mean for the job: the first
host to reach a phase moves the job's secondary status forward (never back), a reported process
is remembered so it can be killed if its agent dies, and an exit lets the end rules run.
Callers hold ``core.lock``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from trainops.control._core import ControlCore, handle_of
from trainops.control._lifecycle import Lifecycle
from trainops.control._status import (
    ENDED,
    HOST_LOST,
    PHASE_MESSAGES,
    PHASE_RANK,
    PrimaryStatus,
    SecondaryStatus,
    StopReason,
)
from trainops.protocol import AgentEvent, Command, EventKind, HostOutcome
from trainops.store import EventLike, HostRecord, HostState, JobRecord

__all__ = ["EventIntake"]

_STOP_REASONS = {
    StopReason.STOPPED: "Stop requested",
    StopReason.MAX_RUNTIME_EXCEEDED: "MaxRuntimeExceeded",
    StopReason.RESTARTING: "Restarting the job after an internal error",
    StopReason.FAILED: "The job has failed",
    StopReason.INTERRUPTED: "Spot interruption: the instance is being reclaimed",
    StopReason.MAX_WAIT_EXCEEDED: "MaxWaitTimeExceeded",
}


class EventIntake:
    """Ingests agent events and answers with commands."""

    def __init__(self, core: ControlCore, lifecycle: Lifecycle) -> None:
        self.core = core
        self.lifecycle = lifecycle

    def ingest(self, host: HostRecord, events: Sequence[AgentEvent]) -> int:
        """Store ``events`` of ``host`` and react to the new ones; returns the acked sequence."""
        result = self.core.store.ingest(host.job, host.host, host.attempt, events)
        if result is None:
            raise KeyError((host.job, host.host, host.attempt))
        if not result.accepted:
            return result.acked_seq
        exited = metrics = False
        for event in result.accepted:
            if event.kind == EventKind.PHASE:
                self._advance(host, event)
            elif event.kind == EventKind.PROCESS:
                self._remember_process(host, event)
            elif event.kind == EventKind.ACTION:  # how a rule's command went (_host_actions)
                self.core.host_actions.finish(host.job, host.attempt, host.host, event.data)
            elif event.kind == EventKind.EXIT:
                self._remember_failure_time(host, event)
            exited = exited or event.kind == EventKind.EXIT
            metrics = metrics or event.kind == EventKind.METRIC
        self.core.notify()
        if metrics:
            self.core.metrics_listener(host.job)
        if exited:
            self.core.heartbeats.forget(host.job, host.host, host.attempt)
            self.lifecycle.evaluate(host.job)
        return result.acked_seq

    def _remember_failure_time(self, host: HostRecord, event: EventLike) -> None:
        """A failed host's ``failed_at`` (a finite Unix time; anything else is ignored)."""
        failed_at = event.data.get("failed_at")
        if event.data.get("outcome") != HostOutcome.FAILED or isinstance(failed_at, bool):
            return
        if isinstance(failed_at, (int, float)) and math.isfinite(failed_at):
            self.core.failure_times[(host.job, host.attempt, host.host)] = float(failed_at)

    def commands_for(self, job: JobRecord, host: HostRecord) -> list[Command]:
        """A stop command while the job (or this host's attempt) should not go on."""
        superseded = host.attempt != job.attempt
        if host.exited or not (superseded or job.stop_reason or job.status in ENDED):
            return []
        reason = _STOP_REASONS.get(StopReason(job.stop_reason)) if job.stop_reason else None
        interrupted = (
            not superseded
            and job.stop_reason == StopReason.INTERRUPTED
            and job.status == PrimaryStatus.IN_PROGRESS
        )
        grace = job.spot_notice if interrupted and job.spot_notice is not None else None
        return [
            Command(
                kind="stop",
                reason=reason or "The job has ended",
                grace_seconds=job.spec.grace_seconds if grace is None else grace,
                interrupted=interrupted,
            )
        ]

    def host_gone(self, job: JobRecord, host: HostRecord, reason: str | None = None) -> None:
        """The agent of ``host`` no longer runs (or is no longer heard from, ``reason`` says so):
        take in its journal, then record how it ended, and end whatever it started. A host that
        ended without saying so ended when it was last heard from: its journal's last event
        (the host's own clock), else its last report, not when the control plane noticed."""
        journal = self.core.backend.read_journal(Path(host.state_dir))
        if journal:
            self.ingest(host, journal)
        silent = self.core.heartbeats.silent_for(host.job, host.host, host.attempt)
        last_heard = self.core.now() - silent
        if journal:
            last_heard = max(last_heard, max(event.ts for event in journal))
        current = self.core.store.host(host.job, host.host, host.attempt)
        if current is not None and not current.exited:
            stopping = job.stop_requested_at is not None or job.status != PrimaryStatus.IN_PROGRESS
            reason = None if stopping else reason or self._lost_reason(host)
            self.core.store.update_host(
                host.job,
                host.host,
                host.attempt,
                state=HostState.EXITED,
                outcome=HostOutcome.STOPPED if stopping else HOST_LOST,
                failure_reason=reason,
                exit_time=min(self.core.now(), last_heard),
            )
        # Whatever the dead (or silent) agent had started must not outlive it.
        self.core.backend.kill(handle_of(current or host))
        self.core.heartbeats.forget(host.job, host.host, host.attempt)
        self.lifecycle.evaluate(host.job)

    def _lost_reason(self, host: HostRecord) -> str:
        gone = self.core.backend.gone_reason(handle_of(host))
        if gone:
            return f"{host.host} was lost: {gone}"
        reason = f"the host agent of {host.host} ended without reporting how the host ended"
        output = self.core.backend.agent_output(Path(host.state_dir), max_chars=600)
        if output:
            reason += f"; its last output: {output}"
        return reason

    def _advance(self, host: HostRecord, event: EventLike) -> None:
        job = self.core.job(host.job)
        if (
            job.status != PrimaryStatus.IN_PROGRESS
            or job.stop_reason
            or host.attempt != job.attempt
        ):
            return
        try:
            phase = SecondaryStatus(str(event.data.get("phase")))
        except ValueError:
            return
        current = PHASE_RANK.get(SecondaryStatus(job.secondary_status))
        if phase not in PHASE_RANK or current is None or PHASE_RANK[phase] <= current:
            return
        message = str(event.data.get("message") or PHASE_MESSAGES[phase])
        # The host's own time: the phase began before the batch that reports it arrived.
        job = self.core.set_secondary(job, phase, message, at=event.ts)
        if phase == SecondaryStatus.TRAINING:  # a spot job's hosts are billed from here
            # (the transition's start, which set_secondary also made the record's modified time)
            self.core.update_job(job, attempt_training_start=job.last_modified_time)

    def _remember_process(self, host: HostRecord, event: EventLike) -> None:
        try:
            pid, pgid = int(event.data["pid"]), int(event.data.get("pgid", event.data["pid"]))
        except (KeyError, TypeError, ValueError):
            return
        ref = self.core.backend.workload_ref(pid, pgid)
        current = self.core.store.host(host.job, host.host, host.attempt)
        if ref is None or current is None:
            return
        entry = {"pid": ref.pid, "pgid": ref.pgid, "create_time": ref.create_time}
        self.core.store.update_host(
            host.job, host.host, host.attempt, processes=[*current.processes, entry]
        )
