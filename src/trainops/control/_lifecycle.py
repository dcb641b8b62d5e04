"""How a job ends, decided from the hosts of its current attempt.

- every host Completed: Completed;
- the first host to end otherwise decides: Failed (the script failed) fails the job with that
  host's reason; an internal error (agent lost, InternalError) restarts the job as a new
  attempt while attempts remain, else fails it with ``InternalServerError: ...``;
- a stop (user or max runtime) ends Stopped.
The other hosts are told to stop whenever the job will not go on, and the job ends once every
host is down: a multi-host job first merges the model and output parts its hosts uploaded
(whichever way it ends), so its archives are listed like a one-host job's. The end time is the
last host's own exit time (plus the merge), not the moment a control plane learnt of it, so a
job that ended while no server ran is not billed for the downtime. Callers hold ``core.lock``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from trainops._errors import TrainopsError
from trainops.control._core import ControlCore, handle_of
from trainops.control._credentials import revoke_quietly
from trainops.control._merge import merge_parts
from trainops.control._status import (
    CAPACITY_WAIT_MESSAGE,
    STARTING_MESSAGE,
    PrimaryStatus,
    SecondaryStatus,
    StopReason,
    seconds_shown,
)
from trainops.protocol import HostOutcome
from trainops.store import HostRecord, JobRecord

__all__ = ["Lifecycle", "running_seconds"]

_log = logging.getLogger("trainops.control")
MAX_REASON = 1024


@dataclass(frozen=True, slots=True)
class _Ending:
    """How a job is about to end, once its hosts are down (and its parts merged)."""

    status: PrimaryStatus
    secondary: SecondaryStatus
    message: str
    failure_reason: str | None = None


@dataclass(frozen=True, slots=True)
class _Merged:
    """The merge of one attempt's parts: its failure, if any, and how long it took."""

    failure: str | None
    seconds: float


_COMPLETED = _Ending(PrimaryStatus.COMPLETED, SecondaryStatus.COMPLETED, "Training job completed")


class Lifecycle:
    """The end rules of jobs."""

    def __init__(self, core: ControlCore) -> None:
        self.core = core
        self._merging: set[str] = set()
        self._merged: dict[tuple[str, int], _Merged] = {}

    def evaluate(self, name: str, known: tuple[JobRecord, list[HostRecord]] | None = None) -> None:
        """Apply whatever rule the job's hosts now satisfy; release capacity once all are down.

        ``known``: the job's record and its current attempt's hosts, when the caller has just
        read them (and nothing changed them since)."""
        job, hosts = known if known is not None else self._read(name)
        all_down = all(h.exited for h in hosts)
        if job.status == PrimaryStatus.STOPPING and all_down:
            self._conclude(job, hosts, self._stopped_ending(job))
        elif job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason == StopReason.RESTARTING:
            if all_down:  # the failed attempt's hosts ran: a spot job is billed for them
                self._relaunch(job, billable_accrued=running_seconds(job, self._end_time(hosts)))
        elif job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason == StopReason.INTERRUPTED:
            if all_down:
                self._after_interruption(job, hosts)
        elif job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason == StopReason.FAILED:
            if all_down:
                reason = self._earliest_failure(hosts) or job.failure_reason or ""
                self._conclude(job, hosts, self._failed_ending(reason))
        elif job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason is None and hosts:
            self._judge(job, hosts)
        if hosts and all_down:
            self.core.backend.release(name)
            self.core.wake_scheduler()

    def _read(self, name: str) -> tuple[JobRecord, list[HostRecord]]:
        job = self.core.job(name)
        return job, self.core.store.hosts(name, job.attempt)

    def begin_stop(self, job: JobRecord, reason: StopReason, message: str) -> None:
        if job.status != PrimaryStatus.IN_PROGRESS or job.stop_reason == StopReason.FAILED:
            return  # a failing job is already being torn down; it ends Failed
        self.core.set_secondary(
            job,
            SecondaryStatus.STOPPING,
            message,
            status=PrimaryStatus.STOPPING,
            stop_reason=reason,
            stop_requested_at=self.core.now(),
        )
        self._signal_running_hosts(job)
        self.evaluate(job.name)

    def fail_unplaced(self, job: JobRecord, reason: str) -> None:
        """End a job that never got hosts (the backend can never hold it) Failed with ``reason``."""
        self._conclude(job, [], self._failed_ending(reason))

    def _failed_at(self, host: HostRecord) -> float:
        """When ``host`` failed: its first rank's failure where it said, else its end."""
        at = self.core.failure_times.get((host.job, host.attempt, host.host))
        return at if at is not None else host.exit_time or 0.0

    def _earliest_failure(self, hosts: list[HostRecord]) -> str | None:
        """The reason of the host that failed first by time (its rank's failure, not its end:
        a host whose peer died may end first, failing on its own account)."""
        failed = [h for h in hosts if h.outcome == HostOutcome.FAILED and h.failure_reason]
        return min(failed, key=self._failed_at).failure_reason if failed else None

    def _judge(self, job: JobRecord, hosts: list[HostRecord]) -> None:
        ended = sorted((h for h in hosts if h.exited), key=self._failed_at)
        culprit = next((h for h in ended if h.outcome != HostOutcome.COMPLETED), None)
        if culprit is not None and culprit.outcome == HostOutcome.FAILED:
            reason = culprit.failure_reason or (
                f"AlgorithmError: {culprit.host} exited with code {culprit.exit_code}"
            )
            self._fail(job, hosts, reason)
        elif culprit is not None:
            self._internal_error(job, hosts, culprit)
        elif len(ended) == len(hosts):
            self._conclude(job, hosts, _COMPLETED)

    def _fail(self, job: JobRecord, hosts: list[HostRecord], reason: str) -> None:
        """The job has failed: it ends Failed once the hosts still running are down."""
        if all(h.exited for h in hosts):
            self._conclude(job, hosts, self._failed_ending(reason))
            return
        job = self.core.update_job(
            job,
            stop_reason=StopReason.FAILED,
            failure_reason=reason[:MAX_REASON],
            stop_requested_at=self.core.now(),
        )
        self._signal_running_hosts(job)

    def _internal_error(self, job: JobRecord, hosts: list[HostRecord], host: HostRecord) -> None:
        reason = host.failure_reason or f"the host agent of {host.host} ended unexpectedly"
        tries = job.attempt - job.interruptions  # an interruption's new attempt is no retry
        if tries >= job.max_attempts:
            self._fail(job, hosts, f"InternalServerError: {reason}")
            return
        message = (
            f"Retrying after internal error: {reason}; attempt {tries + 1} of {job.max_attempts}"
        )
        job = self.core.set_secondary(
            job,
            SecondaryStatus.RESTARTING,
            message,
            stop_reason=StopReason.RESTARTING,
            stop_requested_at=self.core.now(),
        )
        self._signal_running_hosts(job)
        self.evaluate(job.name)

    def _after_interruption(self, job: JobRecord, hosts: list[HostRecord]) -> None:
        """Every host of an interrupted attempt is down: wait out the capacity gap in Pending
        (its end is stored, so a restarted control plane resumes the wait, not restarts it),
        then start a new attempt; with no gap, start it at once (Interrupted, then Starting)."""
        if job.capacity_wait_until is None:
            ran = running_seconds(job, self._end_time(hosts))
            down: dict[str, Any] = {"billable_accrued": ran, "attempt_training_start": None}
            gap = job.spot_gap or 0.0
            if gap <= 0:
                self._relaunch(job, **down)
                return
            message = f"{CAPACITY_WAIT_MESSAGE} (about {seconds_shown(gap)} s)"
            until = self.core.now() + gap
            job = self.core.set_secondary(
                job, SecondaryStatus.PENDING, message, capacity_wait_until=until, **down
            )
        if job.capacity_wait_until is not None and self.core.now() >= job.capacity_wait_until:
            self._relaunch(job)
        else:
            self.core.recheck(job.name)  # the monitor looks again on its next tick

    def _relaunch(self, job: JobRecord, **fields: Any) -> None:
        """Start the job again as a new attempt (an internal error's retry, or after an
        interruption)."""
        self.core.backend.release(job.name)
        fresh: dict[str, Any] = dict.fromkeys(
            ("stop_reason", "stop_requested_at", "capacity_wait_until", "spot_gap", "spot_notice")
        )
        fresh |= {"attempt": job.attempt + 1, "attempt_training_start": None} | fields
        job = self.core.set_secondary(job, SecondaryStatus.STARTING, STARTING_MESSAGE, **fresh)
        self.core.waiting.add(job)
        self.core.wake_scheduler()

    @staticmethod
    def _failed_ending(reason: str) -> _Ending:
        return _Ending(PrimaryStatus.FAILED, SecondaryStatus.FAILED, "Training job failed", reason)

    @staticmethod
    def _stopped_ending(job: JobRecord) -> _Ending:
        if job.stop_reason == StopReason.MAX_RUNTIME_EXCEEDED:
            limit = job.spec.stopping_condition.max_runtime_in_seconds
            message = f"Training job stopped: it ran longer than MaxRuntimeInSeconds ({limit} s)"
            return _Ending(PrimaryStatus.STOPPED, SecondaryStatus.MAX_RUNTIME_EXCEEDED, message)
        if job.stop_reason == StopReason.MAX_WAIT_EXCEEDED:
            wait = job.spec.stopping_condition.max_wait_time_in_seconds
            message = f"Training job stopped: it reached MaxWaitTimeInSeconds ({wait} s)"
            return _Ending(PrimaryStatus.STOPPED, SecondaryStatus.MAX_WAIT_TIME_EXCEEDED, message)
        return _Ending(PrimaryStatus.STOPPED, SecondaryStatus.STOPPED, "Training job stopped")

    # Ending ------------------------------------------------------------------------------

    def _conclude(self, job: JobRecord, hosts: list[HostRecord], ending: _Ending) -> None:
        """Every host is down: merge a multi-host job's parts first, then end the job."""
        key = (job.name, job.attempt)
        if len(hosts) > 1 and key not in self._merged:
            self._start_merge(job, len(hosts), ending)
            return
        merged = self._merged.pop(key, None)
        end = self._end_time(hosts) + (merged.seconds if merged else 0.0)
        if merged is not None and merged.failure is not None:
            if ending.status == PrimaryStatus.COMPLETED:
                ending = replace(self._failed_ending(merged.failure), message=merged.failure)
            else:
                _log.warning("job %s: %s", job.name, merged.failure)
        self._end(job, ending, end)

    def _end_time(self, hosts: list[HostRecord]) -> float:
        """When the last host ended, by its own clock; now for a job that never had hosts."""
        now = self.core.now()
        exits = [h.exit_time for h in hosts if h.exit_time is not None]
        if not hosts or len(exits) < len(hosts):
            return now
        return min(now, max(exits))

    def _start_merge(self, job: JobRecord, host_count: int, ending: _Ending) -> None:
        if job.name in self._merging:
            return
        self._merging.add(job.name)
        if ending.status == PrimaryStatus.COMPLETED:
            message = f"Merging the model and output parts of {host_count} hosts"
            if job.secondary_status != SecondaryStatus.UPLOADING:
                self.core.set_secondary(job, SecondaryStatus.UPLOADING, message)
        threading.Thread(
            target=self._merge, args=(job, host_count), name=f"merge-{job.name}", daemon=True
        ).start()

    def _merge(self, job: JobRecord, host_count: int) -> None:
        failure = None
        started = time.monotonic()
        try:
            merged = merge_parts(
                self.core.settings,
                job.output_prefix,
                host_count,
                compressed=not job.spec.disable_output_compression,
            )
        except (TrainopsError, OSError) as exc:
            failure, merged = f"InternalServerError: could not merge the host parts: {exc}", {}
        result = _Merged(failure, time.monotonic() - started)
        with self.core.lock:
            self._merging.discard(job.name)
            if self.core.closing:
                return  # the store is closing; the next control plane merges again
            try:
                self._after_merge(job.name, job.attempt, merged, result)
            except Exception:
                _log.exception("ending job %s after its merge failed", job.name)
                self.core.recheck(job.name)

    def _after_merge(
        self, name: str, attempt: int, merged: dict[str, str], result: _Merged
    ) -> None:
        for artifact, uri in merged.items():
            self.core.store.add_artifact(name, artifact, uri)
        self.core.store.delete_artifacts(name, ["model_part", "output_part"])
        self._merged[(name, attempt)] = result
        self.evaluate(name)

    def _end(self, job: JobRecord, ending: _Ending, end: float) -> None:
        """End the job as of ``end``. Hosts still running are told to stop (the job has ended)."""
        start = job.training_start_time
        seconds = max(1, round(end - start)) if start is not None else 0
        billable = _billable(job, end, seconds)
        reason = ending.failure_reason
        fields: dict[str, Any] = {"failure_reason": reason[:MAX_REASON]} if reason else {}
        if ending.status == PrimaryStatus.FAILED:
            fields["stop_reason"] = StopReason.FAILED
        # Before the final status: whoever sees the job ended finds its key refused.
        revoke_quietly(self.core.credentials, job.name)
        self.core.set_secondary(
            job,
            ending.secondary,
            ending.message,
            final=True,
            at=end,
            status=ending.status,
            training_end_time=end,
            training_seconds=seconds,
            billable_seconds=billable,
            stop_requested_at=job.stop_requested_at or end,
            **fields,
        )
        self.core.store.revoke_agent_tokens(job.name)  # nothing may speak for an ended job
        self.core.spot_jobs.discard(job.name)
        for key in [k for k in self.core.failure_times if k[0] == job.name]:
            del self.core.failure_times[key]
        self._signal_running_hosts(job)
        _log.info("job %s ended %s/%s", job.name, ending.status, ending.secondary)

    def _signal_running_hosts(self, job: JobRecord) -> None:
        """SIGTERM every agent of the attempt that is still up: a stop with the spec's grace.

        The stop command in the agents' next reply says the same, but only while this control
        plane lives; an embedded server may be gone a moment after the job ended, and the signal
        reaches the agents without it.
        """
        for host in self.core.store.hosts(job.name, job.attempt):
            if not host.exited:
                self.core.backend.terminate(handle_of(host))


def running_seconds(job: JobRecord, now: float) -> float:
    """The seconds a spot job's hosts have run by ``now``: its interrupted attempts' (each from
    its Training to its hosts' end) plus the current attempt's, once it is in Training."""
    start = job.attempt_training_start
    return job.billable_accrued + (max(0.0, now - start) if start is not None else 0.0)


def _billable(job: JobRecord, end: float, training_seconds: int) -> int:
    """A spot job is billed its hosts' running seconds; any other job its whole training time."""
    if not job.spec.use_spot_instances:
        return training_seconds
    return min(training_seconds, round(running_seconds(job, end)))
