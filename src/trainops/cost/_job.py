"""What one training job costs: its billable time at the catalog price of its instances.

The one rule every view uses (a job's describe, a tuning job's trials and total): billable
seconds x on-demand price per hour / 3600 x instance count; while the job runs, the seconds
billed so far stand in for the billable seconds it has not been given yet (a spot job's: the
seconds its attempts have run, not the waits between them).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops.catalog import load_catalog
from trainops.store import JobRecord

__all__ = ["JobCost", "job_cost"]


@dataclass(frozen=True, slots=True)
class JobCost:
    """A job's cost so far: the seconds billed (or running), the rate and the amount."""

    seconds: float
    usd_per_hour: float
    instance_count: int
    currency: str
    prices_as_of: str
    region: str

    @property
    def usd(self) -> float:
        """Seconds x price x count, in the catalog's currency."""
        return self.seconds / 3600.0 * self.usd_per_hour * self.instance_count


def job_cost(job: JobRecord, now: float) -> JobCost:
    """``job``'s cost as of ``now`` (its billable seconds once ended)."""
    catalog = load_catalog()
    instance = catalog.get(job.spec.instance_type)
    return JobCost(
        seconds=_billed_so_far(job, now),
        usd_per_hour=instance.on_demand_usd_per_hour,
        instance_count=job.spec.instance_count,
        currency=catalog.currency,
        prices_as_of=catalog.prices_as_of,
        region=catalog.region,
    )


def _billed_so_far(job: JobRecord, now: float) -> float:
    """Its billable seconds once ended; before, as the control plane bills: a spot job the
    seconds its attempts have run (the interrupted ones' and the current one's since it trained),
    any other job the seconds since its training began."""
    if job.billable_seconds is not None:
        return float(job.billable_seconds)
    if job.spec.use_spot_instances:
        start = job.attempt_training_start
        return job.billable_accrued + (max(0.0, now - start) if start is not None else 0.0)
    start = job.training_start_time
    return max(0.0, now - start) if start is not None else 0.0
