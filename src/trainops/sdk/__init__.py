"""The Python SDK: :class:`TrainingJob`, a job spec that submits and follows itself, and
:class:`HyperparameterTuner`, a tuning job of one, with the SageMaker SDK's helpers
(``WarmStartConfig``, ``WarmStartTypes``, ``TuningJobCompletionCriteriaConfig``, the parameter
ranges, ``StrategyConfig``) and :class:`HyperparameterTuningJobAnalytics` (pandas, lazily).

The debugger's and profiler's SDK objects: ``DebuggerHookConfig``, ``CollectionConfig``,
``TensorBoardOutputConfig``, ``ProfilerConfig``, ``FrameworkProfile`` (the spec's models, same
fields), ``Rule.sagemaker`` / ``ProfilerRule.sagemaker`` and ``rule_configs``."""

from trainops.sdk import rule_configs
from trainops.sdk._analytics import HyperparameterTuningJobAnalytics
from trainops.sdk._rules import ProfilerRule, Rule
from trainops.sdk._training_job import TrainingJob
from trainops.sdk._tuner import HyperparameterTuner
from trainops.sdk._tuner_config import (
    TuningJobCompletionCriteriaConfig,
    WarmStartConfig,
    WarmStartTypes,
)
from trainops.spec import (
    CollectionConfig,
    DebuggerHookConfig,
    FrameworkProfile,
    ProfilerConfig,
    TensorBoardOutputConfig,
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
    "CollectionConfig",
    "ContinuousParameter",
    "DebuggerHookConfig",
    "FrameworkProfile",
    "HyperbandStrategyConfig",
    "HyperparameterTuner",
    "HyperparameterTuningJobAnalytics",
    "IntegerParameter",
    "ProfilerConfig",
    "ProfilerRule",
    "Rule",
    "StrategyConfig",
    "TensorBoardOutputConfig",
    "TrainingJob",
    "TuningJobCompletionCriteriaConfig",
    "WarmStartConfig",
    "WarmStartTypes",
    "rule_configs",
]
