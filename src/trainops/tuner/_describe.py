"""A tuning job as DescribeHyperParameterTuningJob gives it, and its trials as
HyperParameterTrainingJobSummary items.

The declaration's training job (its environment may hold credentials) is never echoed: the
trials' own descriptions are one ``trainops describe`` away.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from trainops.store import MetadataStore, TuningJobRecord, TuningTrialRecord
from trainops.tuner._standin import TuningPlan

__all__ = ["best_trial", "describe_tuning_job", "trial_summary", "tuning_summary"]


def _iso(ts: float | None) -> str | None:
    return (
        None
        if ts is None
        else datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")
    )


def training_status(trial: TuningTrialRecord) -> str:
    """The trial's TrainingJobStatus (a trial not yet submitted is InProgress)."""
    return "InProgress" if trial.status == "Pending" else trial.status


def objective_status(trial: TuningTrialRecord) -> str:
    """``ObjectiveStatus``: Succeeded once a final objective is known, Pending while running."""
    if not trial.ended:
        return "Pending"
    return "Succeeded" if trial.objective is not None and trial.status != "Failed" else "Failed"


def best_trial(plan: TuningPlan, trials: list[TuningTrialRecord]) -> TuningTrialRecord | None:
    """The trial with the best final objective (Completed or Stopped, as SageMaker counts)."""
    best: TuningTrialRecord | None = None
    for trial in trials:
        if objective_status(trial) != "Succeeded" or trial.objective is None:
            continue
        if best is None or best.objective is None or plan.better(trial.objective, best.objective):
            best = trial
    return best


def trial_summary(
    store: MetadataStore, plan: TuningPlan, trial: TuningTrialRecord
) -> dict[str, Any]:
    """One trial as ``HyperParameterTrainingJobSummary``."""
    job = store.get_job(trial.training_job)
    item: dict[str, Any] = {
        "TrainingJobName": trial.training_job,
        "TuningJobName": trial.tuning_job,
        "TrialNumber": trial.number,
        "CreationTime": _iso(trial.creation_time),
        "TrainingStartTime": _iso(job.training_start_time if job else None),
        "TrainingEndTime": _iso(trial.end_time),
        "TrainingJobStatus": training_status(trial),
        "TunedHyperParameters": trial.hyperparameters,
        "ObjectiveStatus": objective_status(trial),
    }
    if trial.failure_reason:
        item["FailureReason"] = trial.failure_reason
    if trial.objective is not None:
        item["FinalHyperParameterTuningJobObjectiveMetric"] = {
            "Type": plan.objective.type,
            "MetricName": plan.objective.metric_name,
            "Value": trial.objective,
        }
    if trial.retry_of is not None:
        item["RetryOf"] = trial.retry_of
    return item


def _counters(trials: list[TuningTrialRecord]) -> dict[str, dict[str, int]]:
    training = Counter(
        ("RetryableError" if t.retryable else "NonRetryableError")
        if t.status == "Failed"
        else training_status(t)
        for t in trials
    )
    objective = Counter(objective_status(t) for t in trials)
    names = ("Completed", "InProgress", "RetryableError", "NonRetryableError", "Stopped")
    return {
        "TrainingJobStatusCounters": {name: training[name] for name in names},
        "ObjectiveStatusCounters": {n: objective[n] for n in ("Succeeded", "Pending", "Failed")},
    }


def _config(plan: TuningPlan) -> dict[str, Any]:
    ranges: dict[str, list[dict[str, Any]]] = {
        "ContinuousParameterRanges": [],
        "IntegerParameterRanges": [],
        "CategoricalParameterRanges": [],
    }
    for name, r in sorted(plan.hyperparameter_ranges.items()):
        if r.type == "Categorical":
            ranges["CategoricalParameterRanges"].append({"Name": name, "Values": r.values})
        else:
            ranges[f"{r.type}ParameterRanges"].append(
                {"Name": name, "MinValue": str(r.min_value), "MaxValue": str(r.max_value),
                 "ScalingType": r.scaling_type}
            )  # fmt: skip
    return {
        "Strategy": plan.strategy,
        "HyperParameterTuningJobObjective": {
            "Type": plan.objective.type,
            "MetricName": plan.objective.metric_name,
        },
        "ResourceLimits": {
            "MaxNumberOfTrainingJobs": plan.max_number_of_training_jobs,
            "MaxParallelTrainingJobs": plan.max_parallel_training_jobs,
        },
        "ParameterRanges": ranges,
        "TrainingJobEarlyStoppingType": plan.training_job_early_stopping_type,
        "RandomSeed": plan.random_seed,
    }


def tuning_summary(tuning: TuningJobRecord) -> dict[str, Any]:
    """One line of ``trainops tuning list``."""
    return {
        "HyperParameterTuningJobName": tuning.name,
        "HyperParameterTuningJobStatus": tuning.status,
        "CreationTime": _iso(tuning.creation_time),
        "HyperParameterTuningEndTime": _iso(tuning.end_time),
    }


def describe_tuning_job(
    store: MetadataStore, tuning: TuningJobRecord, plan: TuningPlan
) -> dict[str, Any]:
    """DescribeHyperParameterTuningJob's response for ``tuning``, plus its trials."""
    trials = store.trials(tuning.name)
    best = best_trial(plan, trials)
    described: dict[str, Any] = {
        **tuning_summary(tuning),
        "LastModifiedTime": _iso(tuning.last_modified_time),
        "HyperParameterTuningJobConfig": _config(plan),
        **_counters(trials),
        "TuningJobCompletionDetails": {
            "NumberOfTrainingJobsObjectiveNotImproving": _not_improving(plan, trials),
        },
        "CompletionReason": tuning.completion_reason,
        "TrainingJobs": [trial_summary(store, plan, t) for t in trials],
    }
    if tuning.failure_reason:
        described["FailureReason"] = tuning.failure_reason
    if best is not None:
        described["BestTrainingJob"] = trial_summary(store, plan, best)
    return described


def _not_improving(plan: TuningPlan, trials: list[TuningTrialRecord]) -> int:
    """How many trials ended, in order, since the best objective last improved by 1 % or more."""
    best: float | None = None
    since = 0
    for trial in sorted((t for t in trials if t.ended), key=lambda t: (t.end_time or 0, t.number)):
        value = trial.objective
        if value is None or trial.status == "Failed":
            since += 1
        elif best is None or (plan.better(value, best) and abs(value - best) >= 0.01 * abs(best)):
            best, since = value, 0
        else:
            since += 1
    return since
