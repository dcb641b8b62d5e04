"""A job's cost advice: on-demand and spot cost, what its interruptions cost, and the checkpoint
interval that would cost least (``trainops cost JOB``, ``GET /jobs/{name}/cost``).

Computed from records only (the job, its status transitions, its checkpoint records), so it is
the same for a running job, an ended one, read by the server or from the store. Billable
seconds are the job's own once it has ended (the control plane's figure); while it runs, as the
control plane bills: a spot job the seconds each attempt has trained so far, any other job the
time since its training began. The spot price is the catalog's estimate unless the
user gave theirs (``trainops.cost.prices_of``); each answer says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainops._errors import JobNotFoundError
from trainops.catalog._settings import SpotPriceSettings
from trainops.cost._interruptions import (
    CheckpointLike,
    Interruption,
    TransitionLike,
    billable_seconds,
    interruptions,
)
from trainops.cost._interval import SECONDS_PER_HOUR, IntervalAdvice, advise_interval
from trainops.cost._prices import Prices, prices_of
from trainops.store import JobRecord, MetadataStore

__all__ = ["SpotCost", "job_spot_cost", "spot_cost"]

_ENDED = frozenset({"Completed", "Failed", "Stopped"})


@dataclass(frozen=True, slots=True)
class SpotCost:
    """What one job cost, on-demand and at spot, and what its interruptions cost."""

    job: str
    status: str
    running: bool
    use_spot: bool
    instance_count: int
    prices: Prices
    billable_seconds: float
    training_seconds: float
    interruptions: tuple[Interruption, ...]
    checkpoints_synced: int
    checkpoint_sync_problems: int  # sync_failed and sync_incomplete records
    interval: IntervalAdvice

    def usd(self, usd_per_hour: float, seconds: float | None = None) -> float:
        """``seconds`` (default: the billable ones) x price x instance count."""
        billed = self.billable_seconds if seconds is None else seconds
        return billed / SECONDS_PER_HOUR * usd_per_hour * self.instance_count

    @property
    def on_demand_usd(self) -> float:
        return self.usd(self.prices.on_demand_usd_per_hour)

    @property
    def spot_usd(self) -> float:
        return self.usd(self.prices.spot_usd_per_hour)

    @property
    def paid_usd_per_hour(self) -> float:
        """The rate this job ran at: spot for a spot job, else on-demand."""
        prices = self.prices
        return prices.spot_usd_per_hour if self.use_spot else prices.on_demand_usd_per_hour

    @property
    def lost_seconds(self) -> float:
        return sum(i.lost_seconds for i in self.interruptions)

    @property
    def restart_seconds(self) -> float:
        return sum(i.restart_seconds or 0.0 for i in self.interruptions)

    @property
    def savings_percent(self) -> float | None:
        """SageMaker's figure for a spot job: (1 - billable / training) x 100."""
        if not self.use_spot or self.training_seconds <= 0:
            return None
        return (1.0 - self.billable_seconds / self.training_seconds) * 100.0

    def to_json(self) -> dict[str, object]:
        """The REST answer (``GET /jobs/{name}/cost``)."""
        return {
            "TrainingJobName": self.job,
            "TrainingJobStatus": self.status,
            "Running": self.running,
            "EnableManagedSpotTraining": self.use_spot,
            "InstanceCount": self.instance_count,
            "Prices": self.prices.to_json(),
            "BillableTimeInSeconds": round(self.billable_seconds, 3),
            "TrainingTimeInSeconds": round(self.training_seconds, 3),
            "SavingsPercent": _r(self.savings_percent, 2),
            "OnDemandCostUsd": round(self.on_demand_usd, 6),
            "SpotCostUsd": round(self.spot_usd, 6),
            "Interruptions": [i.to_json() for i in self.interruptions],
            "LostSeconds": round(self.lost_seconds, 3),
            "LostCostUsd": round(self.usd(self.paid_usd_per_hour, self.lost_seconds), 6),
            "RestartSeconds": round(self.restart_seconds, 3),
            "CheckpointsSynced": self.checkpoints_synced,
            "CheckpointSyncProblems": self.checkpoint_sync_problems,
            "CheckpointInterval": self.interval.to_json(),
        }


def spot_cost(
    job: JobRecord,
    transitions: Sequence[TransitionLike],
    checkpoints: Sequence[CheckpointLike],
    prices: Prices,
    now: float,
    interruptions_per_hour: float | None = None,
    checkpoint_seconds: float | None = None,
) -> SpotCost:
    """``job``'s cost advice as of ``now``; the interval advice at ``interruptions_per_hour``
    (default: the rate this job saw, interruptions per hour it trained) and with
    ``checkpoint_seconds`` as the time to write one (default: as the records measured it)."""
    running = job.status not in _ENDED
    end = now if running else (job.training_end_time or job.last_modified_time)
    billable = _billable(job, transitions, end)
    first_training = _first_training(job, transitions)
    found = tuple(interruptions(transitions, checkpoints, now))
    seen = len(found) / (billable / SECONDS_PER_HOUR) if found and billable > 0 else None
    restarts = [i.restart_seconds for i in found if i.restart_seconds is not None]
    return SpotCost(
        job=job.name,
        status=job.status,
        running=running,
        use_spot=job.spec.use_spot_instances,
        instance_count=job.spec.instance_count,
        prices=prices,
        billable_seconds=billable,
        training_seconds=_training(job, first_training, end),
        interruptions=found,
        checkpoints_synced=sum(1 for r in checkpoints if r.kind == "synced"),
        checkpoint_sync_problems=sum(1 for r in checkpoints if r.kind.startswith("sync_")),
        interval=advise_interval(
            checkpoints, restarts, interruptions_per_hour, seen, checkpoint_seconds
        ),
    )


def _billable(job: JobRecord, transitions: Sequence[TransitionLike], end: float) -> float:
    """The control plane's figure once ended; before, as it bills: a spot job the seconds its
    attempts trained (from the transitions), any other job its whole time since training began."""
    if job.billable_seconds is not None:
        return float(job.billable_seconds)
    if job.spec.use_spot_instances:
        return billable_seconds(transitions, end)
    return _training(job, _first_training(job, transitions), end)


def _first_training(job: JobRecord, transitions: Sequence[TransitionLike]) -> float | None:
    if job.training_start_time is not None:
        return job.training_start_time
    return next((t.start_time for t in transitions if t.status == "Training"), None)


def _training(job: JobRecord, first_training: float | None, end: float) -> float:
    """The whole job's seconds (SageMaker's TrainingTimeInSeconds): the control plane's figure
    once ended, else the time since training first began."""
    if job.training_seconds is not None:
        return float(job.training_seconds)
    return 0.0 if first_training is None else max(0.0, end - first_training)


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def job_spot_cost(
    store: MetadataStore,
    name: str,
    own_prices: SpotPriceSettings,
    now: float,
    interruptions_per_hour: float | None = None,
    checkpoint_seconds: float | None = None,
) -> SpotCost:
    """:func:`spot_cost` of the job called ``name`` in ``store`` (:class:`JobNotFoundError` if
    none is), at its instance type's prices (``own_prices``: the user's spot prices)."""
    job = store.get_job(name)
    if job is None:
        raise JobNotFoundError(f"no job named {name!r}")
    prices = prices_of(job.spec.instance_type, own_prices)
    return spot_cost(job, store.transitions(name), store.checkpoints(name), prices, now,
                     interruptions_per_hour, checkpoint_seconds)  # fmt: skip
