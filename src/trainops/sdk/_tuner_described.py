"""A tuner's arguments read back from a tuning job's description, and a trial's tuned values
typed as their ranges declare them.

``HyperparameterTuner.attach`` rebuilds the tuner from DescribeHyperParameterTuningJob's
``HyperParameterTuningJobConfig`` (ranges, objective, limits, strategy and its config, early
stopping, seed, completion criteria) and ``WarmStartConfig``; ``best_estimator`` turns the best
trial's ``TunedHyperParameters`` (strings, as SageMaker passes them) back into numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainops.sdk._tuner_config import WarmStartConfig
from trainops.tuning import (
    CategoricalParameter,
    CompletionCriteria,
    ContinuousParameter,
    HyperbandStrategyConfig,
    IntegerParameter,
    ParameterRange,
    ParameterType,
    StrategyConfig,
    TunedValue,
)

__all__ = ["ranges_from", "tuner_arguments", "typed_values"]


def tuner_arguments(described: Mapping[str, Any]) -> dict[str, Any]:
    """``HyperparameterTuner``'s arguments (all but the estimator) of the described job."""
    config = described["HyperParameterTuningJobConfig"]
    limits = config["ResourceLimits"]
    objective = config["HyperParameterTuningJobObjective"]
    arguments: dict[str, Any] = {
        "objective_metric_name": objective["MetricName"],
        "objective_type": objective["Type"],
        "hyperparameter_ranges": ranges_from(config["ParameterRanges"]),
        "strategy": config["Strategy"],
        "max_jobs": limits.get("MaxNumberOfTrainingJobs"),
        "max_parallel_jobs": limits["MaxParallelTrainingJobs"],
        "max_runtime_in_seconds": limits.get("MaxRuntimeInSeconds"),
        "early_stopping_type": config.get("TrainingJobEarlyStoppingType", "Off"),
        "random_seed": config.get("RandomSeed"),
        "strategy_config": _strategy_config(config.get("StrategyConfig")),
        "completion_criteria_config": _completion(config.get("TuningJobCompletionCriteria")),
    }
    warm = described.get("WarmStartConfig")
    if warm is not None:
        parents = [p["HyperParameterTuningJobName"] for p in warm["ParentHyperParameterTuningJobs"]]
        arguments["warm_start_config"] = WarmStartConfig(warm["WarmStartType"], parents)
    return arguments


def ranges_from(described: Mapping[str, Any]) -> dict[str, ParameterRange]:
    """``ParameterRanges`` as the API gives them (strings), as ranges by name."""
    ranges: dict[str, ParameterRange] = {}
    for item in described.get("ContinuousParameterRanges", []):
        ranges[item["Name"]] = ContinuousParameter(
            float(item["MinValue"]), float(item["MaxValue"]), item.get("ScalingType", "Auto")
        )
    for item in described.get("IntegerParameterRanges", []):
        ranges[item["Name"]] = IntegerParameter(
            int(float(item["MinValue"])),
            int(float(item["MaxValue"])),
            item.get("ScalingType", "Auto"),
        )
    for item in described.get("CategoricalParameterRanges", []):
        ranges[item["Name"]] = CategoricalParameter(list(item["Values"]))
    return ranges


def typed_values(
    ranges: Mapping[str, ParameterRange], tuned: Mapping[str, str]
) -> dict[str, TunedValue]:
    """A trial's tuned strings as its ranges' types: an Integer an int, a Continuous a float, a
    Categorical the value declared (a string not matching its range stays a string)."""
    return {name: _typed(ranges.get(name), text) for name, text in tuned.items()}


def _typed(rng: ParameterRange | None, text: str) -> TunedValue:
    if rng is None:
        return text
    if rng.type is ParameterType.INTEGER:
        return int(float(text))
    if rng.type is ParameterType.CONTINUOUS:
        return float(text)
    declared = {_text(v): v for v in rng.values or ()}
    return declared.get(text, text)


def _text(value: TunedValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _strategy_config(described: Mapping[str, Any] | None) -> StrategyConfig | None:
    if described is None:
        return None
    hyperband = described.get("HyperbandStrategyConfig", {})
    fields = {
        "min_resource": hyperband.get("MinResource"),
        "max_resource": hyperband.get("MaxResource"),
        "resource_hyperparameter": hyperband.get("ResourceHyperparameter"),
        "reduction_factor": hyperband.get("ReductionFactor"),
    }
    present = {k: v for k, v in fields.items() if v is not None}
    return StrategyConfig(hyperband_strategy_config=HyperbandStrategyConfig(**present))


def _completion(described: Mapping[str, Any] | None) -> CompletionCriteria | None:
    if described is None:
        return None
    fields: dict[str, Any] = {}
    if "TargetObjectiveMetricValue" in described:
        fields["target_objective_metric_value"] = described["TargetObjectiveMetricValue"]
    improving = described.get("BestObjectiveNotImproving")
    if improving is not None:
        fields["best_objective_not_improving"] = {
            "max_number_of_training_jobs_not_improving": improving[
                "MaxNumberOfTrainingJobsNotImproving"
            ]
        }
    converged = described.get("ConvergenceDetected")
    if converged is not None:
        fields["convergence_detected"] = {
            "complete_on_convergence": converged["CompleteOnConvergence"]
        }
    return CompletionCriteria(**fields)
