"""When a tuning job is complete, and which trial is best.

SageMaker's ``TuningJobCompletionCriteria``: a target objective value; the best objective not
improving (by at least 1 %) for N trials; convergence. And the job limit: every trial proposed
and finished. Convergence is not specified by SageMaker; here a search has converged when at
least :data:`CONVERGENCE_MIN_TRIALS` trials have an objective and the best of the later half
improves on the best of the earlier half by less than :data:`CONVERGENCE_TOLERANCE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from trainops.tuning._config import TuningJobConfig
from trainops.tuning._limits import Enabled, ObjectiveType
from trainops.tuning._records import TrialRecord

__all__ = [
    "CONVERGENCE_MIN_TRIALS",
    "CONVERGENCE_TOLERANCE",
    "NOT_IMPROVING_TOLERANCE",
    "CompletionDetails",
    "CompletionReason",
    "best_trial",
    "completion_details",
    "completion_reason",
]

NOT_IMPROVING_TOLERANCE = 0.01  # SageMaker: "not improving" is less than 1 % better
CONVERGENCE_MIN_TRIALS = 10
CONVERGENCE_TOLERANCE = 0.001


class CompletionReason(StrEnum):
    """Why a tuning job completed."""

    MAX_JOBS = "MaxNumberOfTrainingJobsReached"
    TARGET = "TargetObjectiveMetricValueReached"
    NOT_IMPROVING = "BestObjectiveNotImproving"
    CONVERGED = "ConvergenceDetected"


@dataclass(frozen=True)
class CompletionDetails:
    """SageMaker's ``TuningJobCompletionDetails``: progress towards the criteria."""

    number_of_training_jobs_objective_not_improving: int
    convergence_detected: bool
    #: The trial whose objective first made the search converged (its end is SageMaker's
    #: ``ConvergenceDetectedTime``), or None.
    convergence_trial: int | None = None


def best_trial(records: Sequence[TrialRecord], objective_type: ObjectiveType) -> TrialRecord | None:
    """The trial with the best counted objective (Completed or Stopped); the first on ties."""
    best: TrialRecord | None = None
    for record in sorted(records, key=lambda r: r.number):
        value = record.counted_objective
        if value is None or value != value:  # no objective, or NaN
            continue
        incumbent = None if best is None else best.counted_objective
        if incumbent is None or _better(value, incumbent, objective_type):
            best = record
    return best


def _better(a: float, b: float, objective_type: ObjectiveType) -> bool:
    return a > b if objective_type is ObjectiveType.MAXIMIZE else a < b


def _objectives(records: Sequence[TrialRecord]) -> list[float]:
    """The counted objectives of finished trials, in trial order."""
    return [value for _, value in _counted(records)]


def _counted(records: Sequence[TrialRecord]) -> list[tuple[int, float]]:
    """Each finished trial with a counted objective, as (number, objective), in trial order."""
    found = []
    for record in sorted(records, key=lambda r: r.number):
        value = record.counted_objective
        if record.status.finished and value is not None and value == value:
            found.append((record.number, value))
    return found


def _improves(value: float, best: float, objective_type: ObjectiveType, tolerance: float) -> bool:
    """Whether ``value`` beats ``best`` by more than ``tolerance`` of ``|best|``."""
    margin = abs(best) * tolerance
    if objective_type is ObjectiveType.MAXIMIZE:
        return value > best + margin
    return value < best - margin


def not_improving_count(values: Sequence[float], objective_type: ObjectiveType) -> int:
    """How many trials since the best objective last improved by at least 1 %."""
    best: float | None = None
    count = 0
    for value in values:
        if best is None or _improves(value, best, objective_type, NOT_IMPROVING_TOLERANCE):
            best, count = value, 0
        else:
            count += 1
    return count


def converged(values: Sequence[float], objective_type: ObjectiveType) -> bool:
    """Whether the later half of ``values`` improves on the earlier half by under 0.1 %."""
    if len(values) < CONVERGENCE_MIN_TRIALS:
        return False
    half = len(values) // 2
    pick = max if objective_type is ObjectiveType.MAXIMIZE else min
    early, late = pick(values[:half]), pick(values[half:])
    return not _improves(late, early, objective_type, CONVERGENCE_TOLERANCE)


def completion_details(
    config: TuningJobConfig, records: Sequence[TrialRecord]
) -> CompletionDetails:
    """Progress towards the completion criteria."""
    counted = _counted(records)
    values = [value for _, value in counted]
    kind = config.objective.type
    if not converged(values, kind):
        return CompletionDetails(not_improving_count(values, kind), False)
    first = next(k for k in range(CONVERGENCE_MIN_TRIALS, len(values) + 1)
                 if converged(values[:k], kind))  # fmt: skip
    return CompletionDetails(not_improving_count(values, kind), True, counted[first - 1][0])


def completion_reason(
    config: TuningJobConfig, records: Sequence[TrialRecord]
) -> CompletionReason | None:
    """Why the tuning job is complete, or ``None`` while it is not."""
    kind = config.objective.type
    values = _objectives(records)
    criteria = config.completion_criteria
    if criteria is not None:
        target = criteria.target_objective_metric_value
        if target is not None and any(not _better(target, v, kind) for v in values):
            return CompletionReason.TARGET
        patience = criteria.best_objective_not_improving
        if patience is not None and (
            not_improving_count(values, kind) >= patience.max_number_of_training_jobs_not_improving
        ):
            return CompletionReason.NOT_IMPROVING
        detection = criteria.convergence_detected
        if (
            detection is not None
            and detection.complete_on_convergence is Enabled.ENABLED
            and converged(values, kind)
        ):
            return CompletionReason.CONVERGED
    finished = all(r.status.finished for r in records)
    if finished and len(records) >= config.max_training_jobs:
        return CompletionReason.MAX_JOBS
    return None
