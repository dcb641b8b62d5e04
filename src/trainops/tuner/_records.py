"""Between the store's tuning rows and the tuning library: a stored config read back, a trial
row as the search's :class:`~trainops.tuning.TrialRecord`, and a search rebuilt from the rows
(with its warm-start parents' trials as prior ones)."""

from __future__ import annotations

from collections.abc import Sequence

from trainops._errors import SpecError
from trainops.store import MetadataStore, TuningJobRecord, TuningTrialRecord
from trainops.tuning import Search, TrialRecord, TrialStatus, TuningJobConfig

__all__ = [
    "MAX_TRIES",
    "NO_SUCCESS_ATTEMPTS",
    "no_success_reason",
    "retry_due",
    "search_for",
    "stored_config",
    "trial_record",
]

#: How many training jobs one trial may take (its first try and the retries).
MAX_TRIES = 3
#: How many trials may fail, none succeeding, before the tuning job fails (SageMaker's 5).
NO_SUCCESS_ATTEMPTS = 5


def retry_due(trial: TuningTrialRecord) -> bool:
    """Whether the trial's try failed for a reason another try may cure, and tries are left."""
    return trial.status == "Failed" and trial.retryable and trial.tries < MAX_TRIES


def no_success_reason(trials: Sequence[TuningTrialRecord], max_jobs: int) -> str | None:
    """Why the tuning job fails, or ``None``: as SageMaker's, it fails once
    :data:`NO_SUCCESS_ATTEMPTS` trials have failed, or every trial it may run has ended with one
    failed at least, while none has succeeded (ended Completed, or Stopped with an objective).
    A trial being tried again has not ended."""
    if any(t.status == "Completed" or (t.status == "Stopped" and t.objective is not None)
           for t in trials):  # fmt: skip
        return None
    ended = [t for t in trials if t.ended and not retry_due(t)]
    failed = sum(1 for t in ended if t.status == "Failed")
    if failed == 0 or (failed < NO_SUCCESS_ATTEMPTS and len(ended) < max_jobs):
        return None
    return (
        f"No training job succeeded after {failed} attempt{'' if failed == 1 else 's'}. "
        "Please take a look at the training job failures to get more details."
    )


def stored_config(tuning: TuningJobRecord) -> TuningJobConfig:
    """The tuning job's config as it was accepted (:class:`SpecError` if it no longer is)."""
    try:
        return TuningJobConfig(**tuning.config)
    except SpecError:
        raise
    except ValueError as exc:  # pydantic's ValidationError
        raise SpecError([("config", str(exc).splitlines()[0])]) from None


def trial_record(trial: TuningTrialRecord) -> TrialRecord:
    """A trial row as the search sees it: a try that is being retried is still InProgress."""
    ended = trial.ended and not retry_due(trial)
    status = TrialStatus(trial.status) if ended else TrialStatus.IN_PROGRESS
    return TrialRecord(
        number=trial.number,
        hyperparameters=dict(trial.hyperparameters),
        status=status,
        objective=trial.objective if ended and status is not TrialStatus.FAILED else None,
        intermediate_values={step: v for step, v in enumerate(trial.intermediate, start=1)},
        training_job_name=trial.training_job,
    )


def search_for(
    store: MetadataStore,
    tuning: TuningJobRecord,
    config: TuningJobConfig,
    trials: Sequence[TuningTrialRecord],
) -> Search:
    """The search of ``tuning`` rebuilt from its ``trials`` and its parents' ended trials."""
    parents: list[TrialRecord] = []
    if config.warm_start_config is not None:
        for parent in config.warm_start_config.parents:
            parents += [trial_record(t) for t in store.trials(parent) if t.ended]
    return Search(config, [trial_record(t) for t in trials], parents=parents, name=tuning.name)
