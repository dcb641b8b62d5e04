"""The chaos service: plays a spot job's seeded schedule of interruptions (the spec's ``chaos``).

A user rehearses a spot job on a laptop before paying for one: the i-th interruption comes
``after_seconds`` (exponential, mean ``mean_seconds_between``) after the job last entered
Training, reclaims one random host or all of them with ``notice_seconds`` of notice, and keeps
capacity away for a gap uniform in ``capacity_gap_seconds``. Each event is a pure function of the
seed and its index (:func:`chaos_schedule`), and the number already played is stored with each
interruption (``JobRecord.chaos_done``), as is when the attempt entered Training: a restarted
control plane carries the schedule on where it was, never replaying or skipping an event.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from trainops._errors import TrainopsError
from trainops.control.services._base import ControlService, ServiceContext
from trainops.protocol import ChaosPlan
from trainops.store import JobRecord

__all__ = ["CHAOS_SOURCE", "ChaosEvent", "ChaosService", "chaos_schedule", "chaos_service"]

_log = logging.getLogger("trainops.control")
CHAOS_SOURCE = "chaos"
PERIOD_S = 0.25
_IN_PROGRESS = "InProgress"
_TRAINING = "Training"


@dataclass(frozen=True, slots=True)
class ChaosEvent:
    """One interruption of a chaos schedule: ``after_seconds`` after the job entered Training
    (in the attempt it comes in), the ``hosts`` reclaimed, and the capacity gap after it."""

    index: int
    after_seconds: float
    hosts: tuple[str, ...]
    capacity_gap_seconds: float


def chaos_event(plan: ChaosPlan, index: int, host_count: int) -> ChaosEvent:
    """The ``index``-th event of ``plan`` for a job of ``host_count`` hosts (always the same)."""
    draw = random.Random(f"trainops-chaos:{plan.seed}:{index}")
    after = draw.expovariate(1.0 / plan.mean_seconds_between)
    low, high = plan.capacity_gap_seconds
    gap = draw.uniform(low, high)
    names = [f"algo-{i + 1}" for i in range(host_count)]
    hosts = tuple(names) if plan.hosts == "all" else (draw.choice(names),)
    return ChaosEvent(index, after, hosts, gap)


def chaos_schedule(plan: ChaosPlan, host_count: int) -> list[ChaosEvent]:
    """Every event of ``plan``, in order: the same seed gives the same schedule."""
    return [chaos_event(plan, i, host_count) for i in range(plan.interruptions)]


class ChaosService(ControlService):
    """Interrupts the running spot jobs whose spec has ``chaos:`` as their schedule says."""

    name = "chaos"
    period = PERIOD_S

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self._jobs: set[str] = set()
        self._scanned = False

    def job_changed(self, job: JobRecord) -> None:
        if _playing(job):
            self._jobs.add(job.name)
        else:
            self._jobs.discard(job.name)

    def tick(self) -> None:
        if not self._scanned:  # the jobs a previous control plane left running
            for job in self.context.store.active_jobs([_IN_PROGRESS]):
                self.job_changed(job)
            self._scanned = True
        for name in sorted(self._jobs):
            found = self.context.store.get_job(name)
            if found is None or not _playing(found):
                self._jobs.discard(name)
            else:
                self._play(found)

    def _play(self, job: JobRecord) -> None:
        """Interrupt ``job`` if its next event is due."""
        plan, started = job.spec.chaos, job.attempt_training_start
        interrupt = self.context.interrupt_job
        if plan is None or started is None or interrupt is None:
            return
        if job.stop_reason is not None or job.secondary_status != _TRAINING:
            return
        event = chaos_event(plan, job.chaos_done, job.spec.instance_count)
        if self.context.now() < started + event.after_seconds:
            return
        message = f"chaos interruption {event.index + 1} of {plan.interruptions} (seed {plan.seed})"
        try:
            interrupt(
                job.name,
                hosts=list(event.hosts),
                source=CHAOS_SOURCE,
                message=message,
                capacity_gap_seconds=event.capacity_gap_seconds,
                notice_seconds=plan.notice_seconds,
            )
        except TrainopsError as exc:  # it moved on meanwhile (stopping, ending): next tick
            _log.info("chaos: job %s not interrupted: %s", job.name, exc)


def _playing(job: JobRecord) -> bool:
    """Whether ``job`` has chaos events still to play."""
    plan = job.spec.chaos
    return (
        plan is not None
        and job.spec.use_spot_instances
        and job.status == _IN_PROGRESS
        and job.chaos_done < plan.interruptions
    )


def chaos_service(context: ServiceContext) -> ChaosService:
    """The factory registered as ``chaos`` in ``SERVICES``."""
    return ChaosService(context)
