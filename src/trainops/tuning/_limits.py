"""The parts of a tuning job's config below the top level: objective, limits, strategy config,
completion criteria and warm start, each with SageMaker's limits."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from trainops.spec._base import SpecModel

__all__ = [
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
    "canonical",
    "check_tuning_job_name",
]

TUNING_JOB_NAME = re.compile(r"^[A-Za-z0-9](-*[A-Za-z0-9]){0,31}$")
MAX_RUNTIME_SECONDS = (120, 15_768_000)
MAX_PARALLEL_TRAINING_JOBS = 100
MAX_HYPERBAND_RESOURCE = 20_000
MAX_PARENTS = 5


def canonical(value: Any, choices: type[StrEnum]) -> Any:
    """``value`` spelled as one of ``choices`` regardless of case; YAML's ``Off``/``on`` (read
    as booleans) as the choice of that name."""
    if isinstance(value, bool):
        value = "On" if value else "Off"
    if isinstance(value, str):
        for choice in choices:
            if choice.value.lower() == value.lower():
                return choice.value
    return value


def check_tuning_job_name(value: str) -> str:
    """``value`` if it is a valid tuning job name (SageMaker's rule), else a ValueError."""
    if not TUNING_JOB_NAME.match(value):
        raise ValueError(
            f"{value!r}: a tuning job name is 1-32 letters, digits or hyphens, starting and "
            "ending with a letter or digit"
        )
    return value


class Strategy(StrEnum):
    """How the next trial's hyperparameters are chosen."""

    BAYESIAN = "Bayesian"
    RANDOM = "Random"
    GRID = "Grid"
    HYPERBAND = "Hyperband"


class HyperbandResource(SpecModel):
    """Hyperband's resolved resource: the hyperparameter trials run for and its bounds."""

    hyperparameter: str | None
    min_resource: int
    max_resource: int
    reduction_factor: int


class _Canonical(SpecModel):
    """A model whose enum fields accept any case (``maximize``, ``ENABLED``)."""

    @model_validator(mode="before")
    @classmethod
    def _case(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, info in cls.model_fields.items():
            kind = info.annotation
            if name in data and isinstance(kind, type) and issubclass(kind, StrEnum):
                data[name] = canonical(data[name], kind)
        return data


class ObjectiveType(StrEnum):
    """Whether the objective metric is to be maximized or minimized."""

    MAXIMIZE = "Maximize"
    MINIMIZE = "Minimize"


class TuningObjective(_Canonical):
    """The metric to optimize (one of the training job's metric definitions)."""

    metric_name: str = Field(min_length=1, max_length=255)
    type: ObjectiveType

    def better(self, a: float, b: float) -> bool:
        """Whether objective value ``a`` is strictly better than ``b``."""
        return a > b if self.type is ObjectiveType.MAXIMIZE else a < b


class ResourceLimits(SpecModel):
    """How many trials run in all and at once, and for how long the tuning job may run."""

    max_number_of_training_jobs: int | None = Field(default=None, ge=1)
    max_parallel_training_jobs: int = Field(ge=1, le=MAX_PARALLEL_TRAINING_JOBS)
    max_runtime_in_seconds: int | None = Field(
        default=None, ge=MAX_RUNTIME_SECONDS[0], le=MAX_RUNTIME_SECONDS[1]
    )


class HyperbandStrategyConfig(SpecModel):
    """Hyperband's resource: trials run up to ``max_resource`` epochs and are stopped at rungs
    from ``min_resource`` on. ``max_resource`` and ``resource_hyperparameter`` default to the
    static hyperparameter named like epochs (``epochs``, ``numepochs``, ``n-epochs``,
    ``n_epochs``, ``num_epochs``)."""

    min_resource: int = Field(default=1, ge=1, le=MAX_HYPERBAND_RESOURCE)
    max_resource: int | None = Field(default=None, ge=1, le=MAX_HYPERBAND_RESOURCE)
    resource_hyperparameter: str | None = Field(default=None, min_length=1, max_length=256)
    reduction_factor: int = Field(default=3, ge=2, le=10)

    @model_validator(mode="after")
    def _order(self) -> HyperbandStrategyConfig:
        if self.max_resource is not None and self.min_resource > self.max_resource:
            raise ValueError(
                f"min_resource {self.min_resource} is above max_resource {self.max_resource}"
            )
        return self


class StrategyConfig(SpecModel):
    """Strategy-specific settings (SageMaker's ``StrategyConfig``)."""

    hyperband_strategy_config: HyperbandStrategyConfig = Field(
        default_factory=HyperbandStrategyConfig
    )


class EarlyStoppingType(StrEnum):
    """``Auto`` stops trials by the median rule; ``Off`` lets every trial run to its end."""

    OFF = "Off"
    AUTO = "Auto"


class BestObjectiveNotImproving(SpecModel):
    """Complete once the best objective has not improved by 1 % for this many trials."""

    max_number_of_training_jobs_not_improving: int = Field(ge=3)


class Enabled(StrEnum):
    """An Enabled/Disabled switch."""

    ENABLED = "Enabled"
    DISABLED = "Disabled"


class ConvergenceDetected(_Canonical):
    """Complete once the search detects that it has converged."""

    complete_on_convergence: Enabled = Enabled.DISABLED


class CompletionCriteria(SpecModel):
    """When a tuning job may complete before its job limit (``TuningJobCompletionCriteria``)."""

    target_objective_metric_value: float | None = None
    best_objective_not_improving: BestObjectiveNotImproving | None = None
    convergence_detected: ConvergenceDetected | None = None


class WarmStartType(StrEnum):
    """What a warm start may change from its parents."""

    IDENTICAL_DATA_AND_ALGORITHM = "IdenticalDataAndAlgorithm"
    TRANSFER_LEARNING = "TransferLearning"


class WarmStartConfig(_Canonical):
    """Parent tuning jobs whose trials seed this one (their own parents are not included)."""

    parents: list[str] = Field(min_length=1, max_length=MAX_PARENTS)
    warm_start_type: WarmStartType

    @field_validator("parents")
    @classmethod
    def _parents(cls, value: list[str]) -> list[str]:
        for name in value:
            check_tuning_job_name(name)
        repeated = sorted({n for n in value if value.count(n) > 1})
        if repeated:
            raise ValueError(f"parents must be distinct; repeated: {', '.join(repeated)}")
        return value
