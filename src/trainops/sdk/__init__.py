"""The Python SDK: :class:`TrainingJob`, a job spec that submits and follows itself, and
:class:`HyperparameterTuner`, a tuning job of one, with the SageMaker SDK's helpers
(``WarmStartConfig``, ``WarmStartTypes``, ``TuningJobCompletionCriteriaConfig``, the parameter
ranges, ``StrategyConfig``) and :class:`HyperparameterTuningJobAnalytics` (pandas, lazily)."""

from trainops.sdk._analytics import HyperparameterTuningJobAnalytics
from trainops.sdk._training_job import TrainingJob
from trainops.sdk._tuner import HyperparameterTuner
from trainops.sdk._tuner_config import (
    TuningJobCompletionCriteriaConfig,
    WarmStartConfig,
    WarmStartTypes,
)
from trainops.tuning import (
    CategoricalParameter,
    ContinuousParameter,
    HyperbandStrategyConfig,
    IntegerParameter,
    StrategyConfig,
)

__all__ = [
    "CategoricalParameter",
    "ContinuousParameter",
    "HyperbandStrategyConfig",
    "HyperparameterTuner",
    "HyperparameterTuningJobAnalytics",
    "IntegerParameter",
    "StrategyConfig",
    "TrainingJob",
    "TuningJobCompletionCriteriaConfig",
    "WarmStartConfig",
    "WarmStartTypes",
]
