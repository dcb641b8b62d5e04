"""A tuning job as DescribeHyperParameterTuningJob gives it, and its trials as
HyperParameterTrainingJobSummary items.

The declaration's training job (its environment may hold credentials) is never echoed: the
trials' own descriptions are one ``trainops describe`` away.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from trainops._redaction import Masker
from trainops.catalog import load_catalog
from trainops.store import JobRecord, MetadataStore, TuningJobRecord, TuningTrialRecord
from trainops.tuner._analysis import trial_cost, trial_jobs
from trainops.tuner._records import retry_due, trial_record
from trainops.tuner._summaries import SummaryCache
from trainops.tuning import (
    CompletionDetails,
    Search,
    TrialRecord,
    TuningJobConfig,
    completion_details,
)

__all__ = [
    "best_trial",
    "describe_tuning_job",
    "status_counters",
    "training_status",
    "trial_summary",
    "tuning_summary",
]


#: The settled trials' summaries, kept between describes (``_summaries``).
_SUMMARIES = SummaryCache()


def _iso(ts: float | None) -> str | None:
    return (
        None
        if ts is None
        else datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")
    )


def training_status(trial: TuningTrialRecord) -> str:
    """The trial's TrainingJobStatus (one not yet submitted, or to be tried again, InProgress)."""
    return "InProgress" if trial.status == "Pending" or retry_due(trial) else trial.status


def objective_status(trial: TuningTrialRecord) -> str:
    """``ObjectiveStatus``: Succeeded once a final objective is known, Pending while running."""
    if not trial.ended or retry_due(trial):
        return "Pending"
    return "Succeeded" if trial.objective is not None and trial.status != "Failed" else "Failed"


def best_trial(
    config: TuningJobConfig, trials: list[TuningTrialRecord]
) -> TuningTrialRecord | None:
    """The trial with the best counted objective (Completed, or Stopped with its last value)."""
    return _best(config, trials, [trial_record(t) for t in trials])


def _best(
    config: TuningJobConfig, trials: list[TuningTrialRecord], records: list[TrialRecord]
) -> TuningTrialRecord | None:
    """:func:`best_trial`, given ``trials`` as the search sees them."""
    from trainops.tuning import best_trial as best_record

    best = best_record(records, config.objective.type)
    if best is None:
        return None
    return next(t for t in trials if t.training_job == best.training_job_name)


def trial_summary(
    store: MetadataStore,
    config: TuningJobConfig,
    trial: TuningTrialRecord,
    now: float | None = None,
) -> dict[str, Any]:
    """One trial as ``HyperParameterTrainingJobSummary``, plus what its training jobs cost
    (``BillableTimeInSeconds`` and ``EstimatedCostUsd``, its earlier tries included)."""
    return _summary_and_jobs(store, config, trial, now)[0]


def _summary_and_jobs(
    store: MetadataStore,
    config: TuningJobConfig,
    trial: TuningTrialRecord,
    now: float | None = None,
) -> tuple[dict[str, Any], list[JobRecord]]:
    """:func:`trial_summary`, and the training jobs it was made from."""
    jobs = trial_jobs(store, trial)
    job = next((j for j in jobs if j.name == trial.training_job), None)
    seconds, usd = trial_cost(jobs, time.time() if now is None else now)
    item: dict[str, Any] = {
        "TrainingJobName": trial.training_job,
        "TuningJobName": trial.tuning_job,
        "TrialNumber": trial.number,
        "CreationTime": _iso(trial.creation_time),
        "TrainingStartTime": _iso(job.training_start_time if job else None),
        "TrainingEndTime": _iso(trial.end_time),
        "TrainingJobStatus": training_status(trial),
        "TunedHyperParameters": Search.sagemaker_strings(trial.hyperparameters),
        "ObjectiveStatus": objective_status(trial),
        "BillableTimeInSeconds": round(seconds),
        "EstimatedCostUsd": round(usd, 6),
    }
    if trial.failure_reason:  # a script's words may hold its secrets: masked as its job masks
        item["FailureReason"] = _masker(config, trial)(trial.failure_reason)
    if trial.objective is not None:
        item["FinalHyperParameterTuningJobObjectiveMetric"] = {
            "Type": config.objective.type.value,
            "MetricName": config.objective.metric_name,
            "Value": trial.objective,
        }
    if trial.earlier_jobs:
        item["EarlierTrainingJobs"] = trial.earlier_jobs
    return item, jobs


def _masker(config: TuningJobConfig, trial: TuningTrialRecord) -> Masker:
    """What masks the secrets of the trial's training job (``trial_spec``'s environment and
    hyperparameters), as its own describe masks them."""
    values = {**config.static_hyperparameters, **trial.hyperparameters}
    return Masker.for_job(config.training_job.environment, values)


def status_counters(trials: list[TuningTrialRecord]) -> dict[str, dict[str, int]]:
    """``TrainingJobStatusCounters`` and ``ObjectiveStatusCounters`` of a tuning job's trials."""
    training = Counter(
        ("RetryableError" if t.retryable else "NonRetryableError")
        if t.status == "Failed" and not retry_due(t)
        else training_status(t)
        for t in trials
    )
    # Each earlier try of a trial is a training job that failed retryably.
    training["RetryableError"] += sum(len(t.earlier_jobs) for t in trials)
    objective = Counter(objective_status(t) for t in trials)
    names = ("Completed", "InProgress", "RetryableError", "NonRetryableError", "Stopped")
    return {
        "TrainingJobStatusCounters": {name: training[name] for name in names},
        "ObjectiveStatusCounters": {n: objective[n] for n in ("Succeeded", "Pending", "Failed")},
    }


def _bound(kind: str, value: float | None) -> str:
    """A range's bound as the service echoes it: an Integer range's as an integer ("1", not
    "1.0")."""
    if kind == "Integer" and value is not None:
        return str(int(value))
    return str(value)


def _config(config: TuningJobConfig) -> dict[str, Any]:
    ranges: dict[str, list[dict[str, Any]]] = {
        "ContinuousParameterRanges": [],
        "IntegerParameterRanges": [],
        "CategoricalParameterRanges": [],
    }
    for name, r in sorted(config.hyperparameter_ranges.items()):
        kind = r.type.value
        if r.values is not None:
            item: dict[str, Any] = {"Name": name, "Values": [str(v) for v in r.values]}
        else:
            item = {"Name": name, "MinValue": _bound(kind, r.min_value),
                    "MaxValue": _bound(kind, r.max_value),
                    "ScalingType": r.scaling_type.value}  # fmt: skip
        ranges[f"{kind}ParameterRanges"].append(item)
    limits = config.resource_limits
    described: dict[str, Any] = {
        "Strategy": config.strategy.value,
        "HyperParameterTuningJobObjective": {
            "Type": config.objective.type.value,
            "MetricName": config.objective.metric_name,
        },
        "ResourceLimits": {
            "MaxNumberOfTrainingJobs": config.max_training_jobs,
            "MaxParallelTrainingJobs": limits.max_parallel_training_jobs,
        },
        "ParameterRanges": ranges,
        "TrainingJobEarlyStoppingType": config.training_job_early_stopping_type.value,
    }
    if limits.max_runtime_in_seconds is not None:
        described["ResourceLimits"]["MaxRuntimeInSeconds"] = limits.max_runtime_in_seconds
    if config.random_seed is not None:
        described["RandomSeed"] = config.random_seed
    if config.strategy_config is not None:
        described["StrategyConfig"] = _strategy_config(config)
    if config.completion_criteria is not None:
        described["TuningJobCompletionCriteria"] = _completion_criteria(config)
    return described


def _strategy_config(config: TuningJobConfig) -> dict[str, Any]:
    """``StrategyConfig`` as declared (the API's keys; the resource's name and the reduction
    factor are trainops' own)."""
    assert config.strategy_config is not None
    hyperband = config.strategy_config.hyperband_strategy_config
    fields = {
        "MinResource": hyperband.min_resource,
        "MaxResource": hyperband.max_resource,
        "ResourceHyperparameter": hyperband.resource_hyperparameter,
        "ReductionFactor": hyperband.reduction_factor,
    }
    return {"HyperbandStrategyConfig": {k: v for k, v in fields.items() if v is not None}}


def _completion_criteria(config: TuningJobConfig) -> dict[str, Any]:
    """``TuningJobCompletionCriteria`` as declared."""
    criteria = config.completion_criteria
    assert criteria is not None
    described: dict[str, Any] = {}
    if criteria.target_objective_metric_value is not None:
        described["TargetObjectiveMetricValue"] = criteria.target_objective_metric_value
    if criteria.best_objective_not_improving is not None:
        jobs = criteria.best_objective_not_improving.max_number_of_training_jobs_not_improving
        described["BestObjectiveNotImproving"] = {"MaxNumberOfTrainingJobsNotImproving": jobs}
    if criteria.convergence_detected is not None:
        switch = criteria.convergence_detected.complete_on_convergence.value
        described["ConvergenceDetected"] = {"CompleteOnConvergence": switch}
    return described


def _completion_details(
    details: CompletionDetails, trials: list[TuningTrialRecord]
) -> dict[str, Any]:
    """``TuningJobCompletionDetails``: SageMaker's keys (``ConvergenceDetectedTime``: when the
    trial that made the search converged ended), and trainops' ``ConvergenceDetected``."""
    described: dict[str, Any] = {
        "NumberOfTrainingJobsObjectiveNotImproving": (
            details.number_of_training_jobs_objective_not_improving
        ),
        "ConvergenceDetected": details.convergence_detected,
    }
    found = [t for t in trials if t.number == details.convergence_trial]
    if found:
        described["ConvergenceDetectedTime"] = _iso(found[0].end_time)
    return described


def tuning_summary(tuning: TuningJobRecord) -> dict[str, Any]:
    """One line of ``trainops tuning list``."""
    return {
        "HyperParameterTuningJobName": tuning.name,
        "HyperParameterTuningJobStatus": tuning.status,
        "CreationTime": _iso(tuning.creation_time),
        "HyperParameterTuningEndTime": _iso(tuning.end_time),
    }


def _cost(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The tuning job's cost: the sum of its trials' (``trainops.cost.job_cost`` per job)."""
    catalog = load_catalog()
    return {
        "Currency": catalog.currency,
        "BillableTimeInSeconds": sum(s["BillableTimeInSeconds"] for s in summaries),
        "EstimatedCostUsd": round(sum(s["EstimatedCostUsd"] for s in summaries), 6),
        "PricesAsOf": catalog.prices_as_of,
        "Region": catalog.region,
    }


def describe_tuning_job(
    store: MetadataStore,
    tuning: TuningJobRecord,
    config: TuningJobConfig,
    now: float | None = None,
) -> dict[str, Any]:
    """DescribeHyperParameterTuningJob's response for ``tuning``, plus its trials and ``Cost``
    (what its trials' training jobs cost so far: billed seconds at the catalog's prices)."""
    moment = time.time() if now is None else now
    trials, summaries = _SUMMARIES.summarise(
        store, tuning, lambda t: _summary_and_jobs(store, config, t, moment)
    )
    # From the rows alone: a search rebuilt here would replay every trial into Optuna (~0.4 ms
    # a trial) on each describe, and `trainops tune` describes its job every second.
    records = [trial_record(t) for t in trials]
    details = completion_details(config, records)
    best = _best(config, trials, records)
    described: dict[str, Any] = {
        **tuning_summary(tuning),
        "LastModifiedTime": _iso(tuning.last_modified_time),
        # SageMaker's wall-clock runtime of the tuning job (to its end, or so far).
        "ConsumedResources": {
            "RuntimeInSeconds": max(0, round((tuning.end_time or moment) - tuning.creation_time))
        },
        "HyperParameterTuningJobConfig": _config(config),
        **status_counters(trials),
        "TuningJobCompletionDetails": _completion_details(details, trials),
        "CompletionReason": tuning.completion_reason,
        "TrainingJobs": summaries,
        "Cost": _cost(summaries),
    }
    if tuning.failure_reason:
        described["FailureReason"] = tuning.failure_reason
    if config.warm_start_config is not None:
        described["WarmStartConfig"] = {
            "ParentHyperParameterTuningJobs": [
                {"HyperParameterTuningJobName": p} for p in config.warm_start_config.parents
            ],
            "WarmStartType": config.warm_start_config.warm_start_type.value,
        }
    if best is not None:
        described["BestTrainingJob"] = next(
            dict(s) for s in summaries if s["TrainingJobName"] == best.training_job
        )
    if config.warm_start_config is not None:
        # With warm start, SageMaker also names the best of this job's and its parents' trials.
        parents = [t for p in config.warm_start_config.parents for t in store.trials(p)]
        overall = best_trial(config, [*trials, *parents])
        if overall is not None:
            described["OverallBestTrainingJob"] = trial_summary(store, config, overall, moment)
    return described
