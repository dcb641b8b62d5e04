"""How a job ends, decided from the hosts of its current attempt.

- every host Completed: Completed (multi-host jobs first merge their parts, as Uploading);
- the first host to end otherwise decides: Failed (the script failed) ends the job Failed with
  that host's reason; an internal error (agent lost, InternalError) restarts the job as a new
  attempt while attempts remain, else fails it with ``InternalServerError: ...``;
- a stop (user or max runtime) ends Stopped once every host is down.
The other hosts are told to stop whenever the job will not go on. Callers hold ``core.lock``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from trainops._errors import TrainopsError
from trainops.control._core import ControlCore, handle_of
from trainops.control._merge import merge_parts
from trainops.control._status import (
    STARTING_MESSAGE,
    PrimaryStatus,
    SecondaryStatus,
    StopReason,
)
from trainops.protocol import HostOutcome
from trainops.store import HostRecord, JobRecord

__all__ = ["Lifecycle"]

_log = logging.getLogger("trainops.control")
MAX_REASON = 1024


class Lifecycle:
    """The end rules of jobs."""

    def __init__(self, core: ControlCore) -> None:
        self.core = core
        self._merging: set[str] = set()

    def evaluate(self, name: str) -> None:
        """Apply whatever rule the job's hosts now satisfy; release capacity once all are down."""
        job = self.core.job(name)
        hosts = self.core.store.hosts(name, job.attempt)
        all_down = all(h.exited for h in hosts)
        if job.status == PrimaryStatus.STOPPING and all_down:
            self._end_stopped(job)
        elif job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason == StopReason.RESTARTING:
            if all_down:
                self._relaunch(job)
        elif job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason is None and hosts:
            self._judge(job, hosts)
        if hosts and all_down:
            self.core.backend.release(name)
            self.core.wake_scheduler()

    def begin_stop(self, job: JobRecord, reason: StopReason, message: str) -> None:
        if job.status != PrimaryStatus.IN_PROGRESS:
            return
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

    def _judge(self, job: JobRecord, hosts: list[HostRecord]) -> None:
        ended = sorted((h for h in hosts if h.exited), key=lambda h: h.exit_time or 0.0)
        culprit = next((h for h in ended if h.outcome != HostOutcome.COMPLETED), None)
        if culprit is not None and culprit.outcome == HostOutcome.FAILED:
            reason = culprit.failure_reason or (
                f"AlgorithmError: {culprit.host} exited with code {culprit.exit_code}"
            )
            self._end(
                job, PrimaryStatus.FAILED, SecondaryStatus.FAILED, "Training job failed", reason
            )
        elif culprit is not None:
            self._internal_error(job, culprit)
        elif len(ended) == len(hosts):
            self._finish(job, len(hosts))

    def _internal_error(self, job: JobRecord, host: HostRecord) -> None:
        reason = host.failure_reason or f"the host agent of {host.host} ended unexpectedly"
        if job.attempt >= job.max_attempts:
            reason = f"InternalServerError: {reason}"
            self._end(
                job, PrimaryStatus.FAILED, SecondaryStatus.FAILED, "Training job failed", reason
            )
            return
        message = (
            f"Retrying after internal error: {reason}; attempt {job.attempt + 1} of "
            f"{job.max_attempts}"
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

    def _relaunch(self, job: JobRecord) -> None:
        self.core.backend.release(job.name)
        self.core.set_secondary(
            job,
            SecondaryStatus.STARTING,
            STARTING_MESSAGE,
            attempt=job.attempt + 1,
            stop_reason=None,
            stop_requested_at=None,
            agent_token_hash=None,
        )
        self.core.wake_scheduler()

    def _finish(self, job: JobRecord, host_count: int) -> None:
        if host_count == 1:
            self._end(
                job, PrimaryStatus.COMPLETED, SecondaryStatus.COMPLETED, "Training job completed"
            )
            return
        if job.name in self._merging:
            return
        self._merging.add(job.name)
        if job.secondary_status != SecondaryStatus.UPLOADING:
            message = f"Merging the model and output parts of {host_count} hosts"
            self.core.set_secondary(job, SecondaryStatus.UPLOADING, message)
        threading.Thread(
            target=self._merge, args=(job, host_count), name=f"merge-{job.name}", daemon=True
        ).start()

    def _merge(self, job: JobRecord, host_count: int) -> None:
        failure = None
        try:
            merged = merge_parts(self.core.settings, job.output_prefix, host_count)
        except (TrainopsError, OSError) as exc:
            failure, merged = f"InternalServerError: could not merge the host parts: {exc}", {}
        with self.core.lock:
            self._merging.discard(job.name)
            if self.core.closing:
                return  # the store is closing; the next control plane merges again
            try:
                self._after_merge(job.name, merged, failure)
            except Exception:
                _log.exception("finishing job %s after its merge failed", job.name)

    def _after_merge(self, name: str, merged: dict[str, str], failure: str | None) -> None:
        for artifact, uri in merged.items():
            self.core.store.add_artifact(name, artifact, uri)
        self.core.store.delete_artifacts(name, ["model_part", "output_part"])
        job = self.core.job(name)
        if job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason is None:
            if failure is not None:
                self._end(job, PrimaryStatus.FAILED, SecondaryStatus.FAILED, failure, failure)
            else:
                done = "Training job completed"
                self._end(job, PrimaryStatus.COMPLETED, SecondaryStatus.COMPLETED, done)
        self.evaluate(name)

    def _end_stopped(self, job: JobRecord) -> None:
        if job.stop_reason == StopReason.MAX_RUNTIME_EXCEEDED:
            limit = job.spec["stopping_condition"]["max_runtime_in_seconds"]
            secondary = SecondaryStatus.MAX_RUNTIME_EXCEEDED
            message = f"Training job stopped: it ran longer than MaxRuntimeInSeconds ({limit} s)"
        else:
            secondary, message = SecondaryStatus.STOPPED, "Training job stopped"
        self._end(job, PrimaryStatus.STOPPED, secondary, message)

    def _end(
        self,
        job: JobRecord,
        status: PrimaryStatus,
        secondary: SecondaryStatus,
        message: str,
        failure_reason: str | None = None,
    ) -> None:
        """End the job now. Hosts still running are told to stop (the job has ended)."""
        now = self.core.now()
        start = job.training_start_time
        seconds = max(1, round(now - start)) if start is not None else 0
        fields: dict[str, Any] = (
            {"failure_reason": failure_reason[:MAX_REASON]} if failure_reason else {}
        )
        if status == PrimaryStatus.FAILED:
            fields["stop_reason"] = StopReason.FAILED
        self.core.set_secondary(
            job,
            secondary,
            message,
            final=True,
            status=status,
            training_end_time=now,
            training_seconds=seconds,
            billable_seconds=seconds,
            stop_requested_at=job.stop_requested_at or now,
            **fields,
        )
        self._signal_running_hosts(job)
        _log.info("job %s ended %s/%s", job.name, status, secondary)

    def _signal_running_hosts(self, job: JobRecord) -> None:
        """SIGTERM every agent of the attempt that is still up: a stop with the spec's grace.

        The stop command in the agents' next reply says the same, but only while this control
        plane lives; an embedded server may be gone a moment after the job ended, and the signal
        reaches the agents without it.
        """
        for host in self.core.store.hosts(job.name, job.attempt):
            if not host.exited:
                self.core.backend.terminate(handle_of(host))
