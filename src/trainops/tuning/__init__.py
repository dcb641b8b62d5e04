"""Hyperparameter tuning: a tuning job's config, its search, and the trial records between them.

The library half of SageMaker Automatic Model Tuning; no server needed. The tuner service
stores :class:`TrialRecord` s and drives a :class:`Search` rebuilt from them (ask, should_stop,
tell, completed). Optuna (the ``tuning`` extra) is imported when a search is made. Names are
imported on first use: the records need neither pydantic nor Optuna.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.tuning._completion import (
        CompletionDetails,
        CompletionReason,
        best_trial,
        completion_details,
    )
    from trainops.tuning._config import TuningJobConfig, load_tuning_config
    from trainops.tuning._limits import (
        BestObjectiveNotImproving,
        CompletionCriteria,
        ConvergenceDetected,
        EarlyStoppingType,
        Enabled,
        HyperbandResource,
        HyperbandStrategyConfig,
        ObjectiveType,
        ResourceLimits,
        Strategy,
        StrategyConfig,
        TuningObjective,
        WarmStartConfig,
        WarmStartType,
    )
    from trainops.tuning._records import Proposal, TrialRecord, TrialStatus, TunedValue
    from trainops.tuning._rules import HyperbandRule, MedianRule, StoppingRule
    from trainops.tuning._search import OBJECTIVE_HYPERPARAMETER, Search
    from trainops.tuning._space import (
        CategoricalParameter,
        ContinuousParameter,
        IntegerParameter,
        ParameterRange,
        ParameterType,
        ScalingType,
    )
    from trainops.tuning._strategies import (
        SearchStrategy,
        register_strategy,
        strategy_names,
    )
    from trainops.tuning._warmstart import check_warm_start

__all__ = [
    "OBJECTIVE_HYPERPARAMETER",
    "BestObjectiveNotImproving",
    "CategoricalParameter",
    "CompletionCriteria",
    "CompletionDetails",
    "CompletionReason",
    "ContinuousParameter",
    "ConvergenceDetected",
    "EarlyStoppingType",
    "Enabled",
    "HyperbandResource",
    "HyperbandRule",
    "HyperbandStrategyConfig",
    "IntegerParameter",
    "MedianRule",
    "ObjectiveType",
    "ParameterRange",
    "ParameterType",
    "Proposal",
    "ResourceLimits",
    "ScalingType",
    "Search",
    "SearchStrategy",
    "StoppingRule",
    "Strategy",
    "StrategyConfig",
    "TrialRecord",
    "TrialStatus",
    "TunedValue",
    "TuningJobConfig",
    "TuningObjective",
    "WarmStartConfig",
    "WarmStartType",
    "best_trial",
    "check_warm_start",
    "completion_details",
    "load_tuning_config",
    "register_strategy",
    "strategy_names",
]

_MODULE_OF = {
    **dict.fromkeys(
        ["CompletionDetails", "CompletionReason", "best_trial", "completion_details"],
        "trainops.tuning._completion",
    ),
    **dict.fromkeys(
        ["TuningJobConfig", "load_tuning_config"],
        "trainops.tuning._config",
    ),
    **dict.fromkeys(
        [
            "BestObjectiveNotImproving",
            "CompletionCriteria",
            "ConvergenceDetected",
            "EarlyStoppingType",
            "Enabled",
            "HyperbandResource",
            "HyperbandStrategyConfig",
            "ObjectiveType",
            "ResourceLimits",
            "Strategy",
            "StrategyConfig",
            "TuningObjective",
            "WarmStartConfig",
            "WarmStartType",
        ],
        "trainops.tuning._limits",
    ),
    **dict.fromkeys(
        ["Proposal", "TrialRecord", "TrialStatus", "TunedValue"], "trainops.tuning._records"
    ),
    **dict.fromkeys(["HyperbandRule", "MedianRule", "StoppingRule"], "trainops.tuning._rules"),
    **dict.fromkeys(["OBJECTIVE_HYPERPARAMETER", "Search"], "trainops.tuning._search"),
    **dict.fromkeys(
        [
            "CategoricalParameter",
            "ContinuousParameter",
            "IntegerParameter",
            "ParameterRange",
            "ParameterType",
            "ScalingType",
        ],
        "trainops.tuning._space",
    ),
    **dict.fromkeys(
        ["SearchStrategy", "register_strategy", "strategy_names"], "trainops.tuning._strategies"
    ),
    "check_warm_start": "trainops.tuning._warmstart",
}

__getattr__, __dir__ = lazy_names("trainops.tuning", globals(), _MODULE_OF)
