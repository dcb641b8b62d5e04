"""CreateHyperParameterTuningJob's request mapped to our tuning job's declaration.

The tuning job's config is ``trainops.tuning.TuningJobConfig`` (the one declaration of a tuning
job: ``docs/tuning.md``); this module only renames the API's members to its fields, and maps the
training job definition by CreateTrainingJob's own mapping (``_create.spec_of``: the same image
check, the ``sagemaker_program`` and ``sagemaker_submit_directory`` contract). The config's
checks then refuse what trainops cannot run, each problem said at the API's member
(:func:`api_field`). A request trainops cannot map (several training job definitions,
Autotune, ``AutoParameters``) is refused here, saying so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from trainops.server._settings import DEFAULT_IMAGES, ImageMapping
from trainops.server.aws._create import code_uri_of, hyperparameters, spec_of
from trainops.server.aws._errors import AwsError

__all__ = ["OBJECTIVE_HYPERPARAMETER", "api_field", "tuning_request"]

OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"  # the platform sets it on each trial
_CONFIG = "HyperParameterTuningJobConfig"
#: Our config's field paths -> the request's members (the longest prefix wins).
_FIELDS = {
    "tuning_job_name": "HyperParameterTuningJobName",
    "training_job": "TrainingJobDefinition",
    "training_job.metric_definitions": "TrainingJobDefinition.AlgorithmSpecification."
    "MetricDefinitions",
    "training_job.hyperparameters": "TrainingJobDefinition.StaticHyperParameters",
    "strategy": f"{_CONFIG}.Strategy",
    "strategy_config": f"{_CONFIG}.StrategyConfig.HyperbandStrategyConfig",
    "strategy_config.hyperband_strategy_config": f"{_CONFIG}.StrategyConfig."
    "HyperbandStrategyConfig",
    "objective": f"{_CONFIG}.HyperParameterTuningJobObjective",
    "hyperparameter_ranges": f"{_CONFIG}.ParameterRanges",
    "resource_limits": f"{_CONFIG}.ResourceLimits",
    "random_seed": f"{_CONFIG}.RandomSeed",
    "training_job_early_stopping_type": f"{_CONFIG}.TrainingJobEarlyStoppingType",
    "completion_criteria": f"{_CONFIG}.TuningJobCompletionCriteria",
    "warm_start_config": "WarmStartConfig",
    "warm_start_config.parents": "WarmStartConfig.ParentHyperParameterTuningJobs",
}


def _invalid(message: str) -> AwsError:
    return AwsError(400, "ValidationException", message)


def api_field(field: str) -> str:
    """Our config's field path (``resource_limits.max_parallel_training_jobs``) said as the
    request's member (``HyperParameterTuningJobConfig.ResourceLimits.max_parallel_...``)."""
    parts = field.split(".")
    for end in range(len(parts), 0, -1):
        head = ".".join(parts[:end])
        if head in _FIELDS:
            return ".".join([_FIELDS[head], *parts[end:]])
    return field


def tuning_request(
    body: dict[str, Any], images: Sequence[ImageMapping] = DEFAULT_IMAGES
) -> tuple[dict[str, Any], str]:
    """The tuning job's config (as ``TuningJobConfig`` takes it) and its code's URI; ``images``
    (the server's setting) says which Python runs the definition's TrainingImage, as it does for
    CreateTrainingJob."""
    definition = _definition(body)
    config = body["HyperParameterTuningJobConfig"]
    if body.get("Autotune") or (config.get("ParameterRanges") or {}).get("AutoParameters"):
        raise _invalid(
            "Autotune and AutoParameters are not supported: trainops tunes the ranges given in "
            "ParameterRanges"
        )
    static = {
        k: v
        for k, v in (definition.get("StaticHyperParameters") or {}).items()
        if k != OBJECTIVE_HYPERPARAMETER
    }
    job_body = definition | {"HyperParameters": static, "ResourceConfig": _resources(definition)}
    params = hyperparameters(job_body)
    code_uri = code_uri_of(params)
    declared: dict[str, Any] = {
        "tuning_job_name": body["HyperParameterTuningJobName"],
        "training_job": spec_of(job_body, params, images),
        "strategy": config["Strategy"],
        "objective": _objective(config, definition),
        "hyperparameter_ranges": _ranges(config, definition),
        "resource_limits": _limits(config["ResourceLimits"]),
        "training_job_early_stopping_type": config.get("TrainingJobEarlyStoppingType", "Off"),
    }
    if "RandomSeed" in config:
        declared["random_seed"] = config["RandomSeed"]
    return declared | _optional(body, config), code_uri


def _definition(body: dict[str, Any]) -> dict[str, Any]:
    single, several = body.get("TrainingJobDefinition"), body.get("TrainingJobDefinitions")
    if single is not None and several is not None:
        raise _invalid("Specify either TrainingJobDefinition or TrainingJobDefinitions, not both")
    if several is not None and len(several) != 1:
        raise _invalid(
            f"TrainingJobDefinitions has {len(several)} definitions: trainops runs one training "
            "job definition per tuning job; give one (or TrainingJobDefinition)"
        )
    found = single if single is not None else (several or [None])[0]
    if found is None:
        raise _invalid("TrainingJobDefinition is required: the training job the trials run")
    return dict(found)


def _resources(definition: dict[str, Any]) -> dict[str, Any]:
    """The trials' instances: ``ResourceConfig``, or ``HyperParameterTuningResourceConfig`` (what
    the SageMaker SDK sends for a tuner's estimator); of ``InstanceConfigs`` (tried in order by
    the service), the first."""
    plain = definition.get("ResourceConfig")
    tuning = definition.get("HyperParameterTuningResourceConfig")
    if plain and tuning:
        raise _invalid(
            "TrainingJobDefinition has both ResourceConfig and HyperParameterTuningResourceConfig:"
            " specify one"
        )
    resources: dict[str, Any] = dict(plain or tuning or {})
    configs = resources.get("InstanceConfigs") or []
    if "InstanceType" in resources or not configs:
        return resources
    first = configs[0]
    return resources | {
        "InstanceType": first["InstanceType"],
        "InstanceCount": first["InstanceCount"],
    }


def _objective(config: dict[str, Any], definition: dict[str, Any]) -> dict[str, Any]:
    objective = config.get("HyperParameterTuningJobObjective") or definition.get("TuningObjective")
    if objective is None:
        raise _invalid(
            "HyperParameterTuningJobConfig.HyperParameterTuningJobObjective is required: the "
            "metric the tuning job optimizes"
        )
    metric = objective["MetricName"]
    algorithm = definition.get("AlgorithmSpecification") or {}
    defined = [m.get("Name") for m in algorithm.get("MetricDefinitions") or []]
    if metric not in defined:
        # the service's words; a framework image has no metrics of its own to tune on
        raise _invalid(
            "A metric is required for this hyperparameter tuning job objective. Provide a "
            f"metric in the metric definitions: {metric[:256]!r} is not among "
            "TrainingJobDefinition.AlgorithmSpecification.MetricDefinitions (the SageMaker "
            "SDK's HyperparameterTuner sends its own metric_definitions, not its estimator's)"
        )
    return {"metric_name": metric, "type": objective["Type"]}


def _ranges(config: dict[str, Any], definition: dict[str, Any]) -> dict[str, Any]:
    given = config.get("ParameterRanges") or definition.get("HyperParameterRanges") or {}
    ranges: dict[str, Any] = {}
    for kind in ("Continuous", "Integer", "Categorical"):
        for item in given.get(f"{kind}ParameterRanges") or []:
            name = item["Name"]
            if name in ranges:
                raise _invalid(f"ParameterRanges names hyperparameter {name!r} more than once")
            ranges[name] = _range(kind, item)
    if not ranges:
        raise _invalid(
            "HyperParameterTuningJobConfig.ParameterRanges is required: at least one "
            "hyperparameter range to tune"
        )
    return ranges


def _range(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    if kind == "Categorical":
        return {"type": kind, "values": list(item["Values"])}
    return {
        "type": kind,
        "min_value": _number(kind, item, "MinValue"),
        "max_value": _number(kind, item, "MaxValue"),
        "scaling_type": item.get("ScalingType", "Auto"),
    }


def _number(kind: str, item: dict[str, Any], member: str) -> float:
    text = item[member]
    try:
        value = int(text) if kind == "Integer" else float(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        what = "an integer" if kind == "Integer" else "a finite number"
        raise _invalid(
            f"{member} {text[:64]!r} of the {kind} range of {item['Name'][:256]!r} is not {what}"
        )
    return float(value)


def _limits(limits: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {"max_parallel_training_jobs": limits["MaxParallelTrainingJobs"]}
    if "MaxNumberOfTrainingJobs" in limits:
        found["max_number_of_training_jobs"] = limits["MaxNumberOfTrainingJobs"]
    if "MaxRuntimeInSeconds" in limits:
        found["max_runtime_in_seconds"] = limits["MaxRuntimeInSeconds"]
    return found


def _optional(body: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    hyperband = (config.get("StrategyConfig") or {}).get("HyperbandStrategyConfig")
    if hyperband is not None:
        found["strategy_config"] = {"hyperband_strategy_config": _hyperband(hyperband)}
    criteria = config.get("TuningJobCompletionCriteria")
    if criteria:
        found["completion_criteria"] = _criteria(criteria)
    warm = body.get("WarmStartConfig")
    if warm is not None:
        parents = warm["ParentHyperParameterTuningJobs"]
        found["warm_start_config"] = {
            "parents": [p.get("HyperParameterTuningJobName", "") for p in parents],
            "warm_start_type": warm["WarmStartType"],
        }
    return found


def _hyperband(hyperband: dict[str, Any]) -> dict[str, Any]:
    return {
        ours: hyperband[theirs]
        for ours, theirs in (("min_resource", "MinResource"), ("max_resource", "MaxResource"))
        if theirs in hyperband
    }


def _criteria(criteria: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if "TargetObjectiveMetricValue" in criteria:
        found["target_objective_metric_value"] = criteria["TargetObjectiveMetricValue"]
    patience = criteria.get("BestObjectiveNotImproving")
    if patience and "MaxNumberOfTrainingJobsNotImproving" in patience:
        jobs = patience["MaxNumberOfTrainingJobsNotImproving"]
        found["best_objective_not_improving"] = {"max_number_of_training_jobs_not_improving": jobs}
    convergence = criteria.get("ConvergenceDetected")
    if convergence is not None:
        switch = convergence.get("CompleteOnConvergence", "Disabled")
        found["convergence_detected"] = {"complete_on_convergence": switch}
    return found
