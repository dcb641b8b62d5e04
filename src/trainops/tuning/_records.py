"""What the tuner and its store exchange: a trial's record, its status and a proposal.

The store is the single source of truth of a tuning job: a :class:`~trainops.tuning.Search` is
rebuilt from these records after any restart (never pickled), so a record carries everything the
search engine learns from a trial: its hyperparameters, its status, its objective and its
intermediate (per-epoch) objective values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Proposal", "TrialRecord", "TrialStatus", "TunedValue"]

# A tuned hyperparameter's value as the search proposes it: a float (Continuous), an int
# (Integer) or the value of a Categorical range (a string, or a number written in the range).
TunedValue = str | int | float


class TrialStatus(StrEnum):
    """A trial's status as the search engine sees it (SageMaker's TrainingJobStatus).

    ``InProgress`` covers a trial the service retries (a retryable error, a lost host): it keeps
    its number and hyperparameters and is not counted again against the job limit.
    """

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"

    @property
    def finished(self) -> bool:
        """Whether the trial has ended (Completed, Failed or Stopped)."""
        return self is not TrialStatus.IN_PROGRESS


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a tuning job, as the store keeps it.

    ``number`` counts from 0 in the order the search proposed the trials. ``hyperparameters``
    holds the tuned values only (static ones come from the config). ``objective`` is the final
    objective value: for a Stopped trial, its last intermediate value (SageMaker keeps it and
    counts it). ``intermediate_values`` maps a step (the epoch, from 1) to the objective then.
    """

    number: int
    hyperparameters: Mapping[str, TunedValue]
    status: TrialStatus = TrialStatus.IN_PROGRESS
    objective: float | None = None
    intermediate_values: Mapping[int, float] = field(default_factory=dict)
    training_job_name: str | None = None

    @property
    def counted_objective(self) -> float | None:
        """The objective the trial counts with: its final value, else (Stopped) its last
        intermediate value; ``None`` for a trial without one or a Failed trial."""
        if self.status is TrialStatus.FAILED:
            return None
        if self.objective is not None:
            return self.objective
        if self.status is TrialStatus.STOPPED and self.intermediate_values:
            return self.intermediate_values[max(self.intermediate_values)]
        return None


@dataclass(frozen=True)
class Proposal:
    """A trial the search wants run: its number and its tuned hyperparameters.

    ``hyperparameters`` are typed values; :meth:`Search.training_hyperparameters` gives the full
    set a training job receives (static ones included) and :meth:`Search.sagemaker_strings` the
    strings SageMaker would pass.
    """

    number: int
    hyperparameters: Mapping[str, TunedValue]

    def record(self) -> TrialRecord:
        """The record of this proposal just started (InProgress, nothing measured yet)."""
        return TrialRecord(number=self.number, hyperparameters=dict(self.hyperparameters))
