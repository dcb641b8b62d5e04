"""Managed spot: interrupting a spot job, its max wait, and the backend's preemptions.

An interruption, from any source (a user through the API, the chaos service, a backend losing a
machine), goes one way: every host of the current attempt gets a stop command marked
``interrupted`` with the notice as its grace (SageMaker restarts the whole job even when one
host is reclaimed), the job shows ``Interrupted``, and once every host is down the lifecycle
waits out the capacity gap in ``Pending`` and starts a new attempt (see ``Lifecycle``). An
interruption uses no retry. ``max_wait_time_in_seconds``, counted from the job's creation,
covers all of it: when it runs out the job stops, ending ``Stopped/MaxWaitTimeExceeded``.
Callers hold ``core.lock``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from trainops._errors import JobNotFoundError, TrainopsError
from trainops.backends import Preemption
from trainops.control._core import ControlCore
from trainops.control._lifecycle import Lifecycle
from trainops.control._status import (
    ENDED,
    JobEndedError,
    PrimaryStatus,
    SecondaryStatus,
    StopReason,
    seconds_shown,
)
from trainops.control.services import CHAOS_SOURCE
from trainops.store import JobRecord

__all__ = [
    "MAX_GAP_SECONDS",
    "MAX_NOTICE_SECONDS",
    "Interruptions",
]

_log = logging.getLogger("trainops.control")
MAX_GAP_SECONDS = 7 * 24 * 3600.0
MAX_NOTICE_SECONDS = 3600.0
MIN_BACKEND_NOTICE = 1.0
_MAX_MESSAGE = 500
_INTERRUPTIBLE = (SecondaryStatus.DOWNLOADING, SecondaryStatus.TRAINING)


class Interruptions:
    """The entry points of managed spot; the lifecycle finishes what they begin."""

    def __init__(self, core: ControlCore, lifecycle: Lifecycle) -> None:
        self.core = core
        self.lifecycle = lifecycle

    def interrupt(
        self,
        job_name: str,
        *,
        hosts: Sequence[str] | None,
        source: str,
        message: str = "",
        capacity_gap_seconds: float = 0.0,
        notice_seconds: float | None = None,
    ) -> JobRecord:
        """Interrupt a running spot job (see the module's docstring); its record after."""
        job = self._interruptible(job_name)
        names = self._hosts_of(job, hosts)
        gap = _seconds("capacity_gap_seconds", capacity_gap_seconds, MAX_GAP_SECONDS)
        notice = (
            job.spec.grace_seconds
            if notice_seconds is None
            else _seconds("notice_seconds", notice_seconds, MAX_NOTICE_SECONDS)
        )
        text = _message(message)
        why = f"{text} ({source})" if text else f"spot capacity reclaimed ({source})"
        status_message = (
            f"Spot interruption of {', '.join(names)}: {why}; the hosts get {seconds_shown(notice)} s notice "
            "before they stop, then the job waits for capacity and resumes from its checkpoint"
        )
        now = self.core.now()
        chaos_done = job.chaos_done + (1 if source == CHAOS_SOURCE else 0)
        job = self.core.set_secondary(
            job,
            SecondaryStatus.INTERRUPTED,
            status_message,
            stop_reason=StopReason.INTERRUPTED,
            stop_requested_at=now,
            interruptions=job.interruptions + 1,
            spot_notice=notice,
            spot_gap=gap,
            chaos_done=chaos_done,
        )
        _log.info("job %s interrupted (%s): %s", job.name, source, ", ".join(names))
        self.lifecycle.evaluate(job.name)
        return self.core.job(job.name)

    def _interruptible(self, job_name: str) -> JobRecord:
        job = self.core.store.get_job(job_name)
        if job is None:
            raise JobNotFoundError(f"no job named {job_name!r}")
        if job.status in ENDED:
            raise JobEndedError(f"job {job_name!r} has already ended ({job.status})")
        if not job.spec.use_spot_instances:
            raise TrainopsError(
                f"job {job_name!r} is not a spot job (use_spot_instances is false): only spot "
                "jobs are interrupted; stop it instead"
            )
        running = job.status == PrimaryStatus.IN_PROGRESS and job.stop_reason is None
        if not running or job.secondary_status not in _INTERRUPTIBLE:
            raise JobEndedError(
                f"job {job_name!r} is {job.status}/{job.secondary_status}: only a job in "
                "Downloading or Training can be interrupted"
            )
        return job

    def _hosts_of(self, job: JobRecord, wanted: Sequence[str] | None) -> list[str]:
        """The hosts named (all of them where none is), each checked to be one of the job's."""
        known = [h.host for h in self.core.store.hosts(job.name, job.attempt)]
        if not wanted:
            return known
        if isinstance(wanted, str) or len(wanted) > len(known):
            raise TrainopsError(f"hosts: give a list of at most {len(known)} of {_list(known)}")
        unknown = [h for h in wanted if h not in known]
        if unknown:
            shown = repr(unknown[0])[:80]
            raise TrainopsError(
                f"hosts: job {job.name!r} has no host {shown}; its hosts are {_list(known)}"
            )
        return sorted(set(wanted), key=known.index)

    def check_max_wait(self, job: JobRecord) -> bool:
        """Begin the stop of a spot job whose max wait ran out; whether it did."""
        wait = job.spec.max_wait_seconds
        if wait is None or job.status != PrimaryStatus.IN_PROGRESS:
            return False
        if job.stop_reason == StopReason.FAILED or self.core.now() - job.creation_time < wait:
            return False
        message = f"Stopping: the job reached MaxWaitTimeInSeconds ({wait:g} s)"
        self.lifecycle.begin_stop(job, StopReason.MAX_WAIT_EXCEEDED, message)
        return True

    def preempted(self, preemption: Preemption) -> None:
        """Interrupt every running spot job with a host on the machine the backend is losing
        (the notice: the time left, at least 1 s); other jobs are left to the liveness checks
        (their lost hosts are internal errors, retried as before)."""
        now = self.core.now()
        left = MIN_BACKEND_NOTICE if preemption.deadline is None else preemption.deadline - now
        notice = max(MIN_BACKEND_NOTICE, left)
        for name in self.core.store.watched_jobs(()):
            job = self.core.store.get_job(name)
            if job is None or not job.spec.use_spot_instances:
                continue
            on_node = [
                h.host
                for h in self.core.store.hosts(name, job.attempt)
                if not h.exited and h.node == preemption.node
            ]
            if not on_node:
                continue
            try:
                self.interrupt(
                    name,
                    hosts=on_node,
                    source=f"backend: node {preemption.node}",
                    message=preemption.reason,
                    notice_seconds=min(notice, MAX_NOTICE_SECONDS),
                )
            except TrainopsError as exc:  # ending, or not in Training yet: liveness handles it
                _log.info(
                    "preemption of %s: job %s not interrupted: %s", preemption.node, name, exc
                )


def _seconds(field: str, value: float, limit: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TrainopsError(f"{field}: expected a number of seconds")
    if not math.isfinite(value) or value < 0 or value > limit:
        raise TrainopsError(f"{field}: {value!r} is not between 0 and {limit:g} seconds")
    return float(value)


def _message(text: str) -> str:
    if not isinstance(text, str) or len(text) > _MAX_MESSAGE:
        raise TrainopsError(f"message: expected text of at most {_MAX_MESSAGE} characters")
    # One line, no control characters (a terminal's escapes) in a status message.
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _list(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none yet"
