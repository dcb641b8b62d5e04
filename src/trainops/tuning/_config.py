"""A tuning job's config: SageMaker's ``HyperParameterTuningJobConfig`` and its training job.

```yaml
tuning_job_name: cnn-tune               # at most 32 characters
training_job: job.yaml                  # a job spec file (relative to this one) or inline
strategy: Hyperband                     # Bayesian (default), Random, Grid or Hyperband
objective: {metric_name: val_loss, type: Minimize}
hyperparameter_ranges:
  lr: {type: Continuous, min_value: 1e-4, max_value: 0.1, scaling_type: Logarithmic}
  optimizer: [sgd, adam]
resource_limits: {max_number_of_training_jobs: 20, max_parallel_training_jobs: 2}
```

The training job's hyperparameters are the static ones; a tuned name overrides a static one of
the same name (as the SageMaker SDK does). Every refusal names the field, its line and the fix.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from trainops._errors import SpecError
from trainops.protocol import RESERVED_HYPERPARAMETERS
from trainops.spec import JobSpec
from trainops.spec._base import SpecModel
from trainops.spec._lines import read_spec_text, read_spec_yaml, with_lines
from trainops.spec._load import load_spec, resolve_paths
from trainops.tuning._limits import (
    CompletionCriteria,
    EarlyStoppingType,
    HyperbandStrategyConfig,
    ResourceLimits,
    StrategyConfig,
    TuningObjective,
    WarmStartConfig,
    canonical,
    check_tuning_job_name,
)
from trainops.tuning._space import ParameterRange, ParameterType, grid_size

__all__ = ["HyperbandResource", "Strategy", "TuningJobConfig", "load_tuning_config"]

MAX_RANGES = 30
MAX_HYPERPARAMETERS = 100
MAX_METRICS = 20
MAX_TRAINING_JOBS = 750
MAX_RANDOM_TRAINING_JOBS = 10_000
EPOCHS_NAMES = ("epochs", "numepochs", "n-epochs", "n_epochs", "num_epochs")


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


class TuningJobConfig(SpecModel):
    """A tuning job: one training job spec run many times with different hyperparameters."""

    tuning_job_name: str | None = None
    training_job: JobSpec
    strategy: Strategy = Strategy.BAYESIAN
    strategy_config: StrategyConfig | None = None
    objective: TuningObjective
    hyperparameter_ranges: dict[str, ParameterRange] = Field(min_length=1)
    resource_limits: ResourceLimits
    random_seed: int | None = Field(default=None, ge=0, le=2**31 - 1)
    training_job_early_stopping_type: EarlyStoppingType = EarlyStoppingType.OFF
    completion_criteria: CompletionCriteria | None = None
    warm_start_config: WarmStartConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _case(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for name, kind in (
                ("strategy", Strategy),
                ("training_job_early_stopping_type", EarlyStoppingType),
            ):
                if name in data:
                    data[name] = canonical(data[name], kind)
        return data

    @field_validator("tuning_job_name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else check_tuning_job_name(value)

    @field_validator("hyperparameter_ranges")
    @classmethod
    def _ranges(cls, value: dict[str, ParameterRange]) -> dict[str, ParameterRange]:
        if len(value) > MAX_RANGES:
            raise ValueError(f"{len(value)} ranges; at most {MAX_RANGES} hyperparameters are tuned")
        for name in value:
            _check_tuned_name(name)
        return value

    @model_validator(mode="after")
    def _whole(self) -> TuningJobConfig:
        # Raised as a SpecError (pydantic lets it through) so each problem keeps its field.
        checks = (
            _check_objective,
            _check_counts,
            _check_strategy,
            _check_job_limit,
            _check_trial_hyperparameters,
        )
        problems = [problem for check in checks for problem in check(self)]
        if problems:
            raise SpecError(problems)
        return self

    @property
    def static_hyperparameters(self) -> dict[str, Any]:
        """The training job's hyperparameters that are not tuned (Hyperband's resource set)."""
        static = {
            k: v
            for k, v in self.training_job.hyperparameters.items()
            if k not in self.hyperparameter_ranges
        }
        resource = _hyperband_resource(self) if self.strategy is Strategy.HYPERBAND else None
        if isinstance(resource, HyperbandResource) and resource.hyperparameter is not None:
            static[resource.hyperparameter] = resource.max_resource
        return static

    @property
    def max_training_jobs(self) -> int:
        """How many trials the job runs at most (a Grid's combinations by default)."""
        limit = self.resource_limits.max_number_of_training_jobs
        if limit is None:
            return grid_size(self.hyperparameter_ranges)
        return limit

    def hyperband_resource(self) -> HyperbandResource | None:
        """Hyperband's resource (``None`` for another strategy); the config is known valid."""
        if self.strategy is not Strategy.HYPERBAND:
            return None
        resource = _hyperband_resource(self)
        assert isinstance(resource, HyperbandResource)
        return resource


def _check_tuned_name(name: str) -> None:
    if not name or len(name) > 256:
        raise ValueError(f"name {name!r} must be 1-256 characters")
    if "=" in name or "\x00" in name:
        raise ValueError(f"name {name!r} must not contain '=' or NUL")
    if name in RESERVED_HYPERPARAMETERS:
        raise ValueError(f"{name!r} is reserved: SageMaker and trainops set it")


Problems = list[tuple[str, str]]


def _check_objective(config: TuningJobConfig) -> Problems:
    names = [m.name for m in config.training_job.metric_definitions]
    metric = config.objective.metric_name
    problems: Problems = []
    if metric not in names:
        known = f" (defined: {', '.join(names)})" if names else ""
        problems.append((
            "objective.metric_name",
            f"{metric!r} has no metric definition{known}; add one to "
            f"training_job.metric_definitions, e.g. {{name: {metric}, regex: 'loss=([0-9.]+)'}}",
        ))  # fmt: skip
    if len(names) > MAX_METRICS:
        problems.append((
            "training_job.metric_definitions",
            f"{len(names)} metrics; a tuning job's training job has at most {MAX_METRICS}",
        ))  # fmt: skip
    return problems


def _check_counts(config: TuningJobConfig) -> Problems:
    total = len(config.hyperparameter_ranges) + len(config.static_hyperparameters)
    if total <= MAX_HYPERPARAMETERS:
        return []
    return [(
        "training_job.hyperparameters",
        f"{total} hyperparameters (tuned and static); at most {MAX_HYPERPARAMETERS}: drop "
        "some static ones",
    )]  # fmt: skip


def _check_trial_hyperparameters(config: TuningJobConfig) -> Problems:
    """Every tuned value must be a hyperparameter a training job takes (no NUL, at most 2500
    characters, all of them together small enough to start the script): trials are checked
    with each categorical value in turn and the numeric ranges at their bounds."""
    job = config.training_job.model_dump()
    rounds = max(len(rng.values or (0, 0)) for rng in config.hyperparameter_ranges.values())
    for index in range(rounds):
        tuned = {name: _sample(rng, index) for name, rng in config.hyperparameter_ranges.items()}
        try:
            JobSpec(**{**job, "hyperparameters": {**config.static_hyperparameters, **tuned}})
        except SpecError as exc:
            return [(_tuned_path(config, path), reason) for path, reason in exc.problems]
    return []


def _tuned_path(config: TuningJobConfig, path: str) -> str:
    """A trial's ``hyperparameters.<name>`` as the field of this config that set it."""
    name = path.partition(".")[2]
    if path == "hyperparameters" or name in config.hyperparameter_ranges:
        return f"hyperparameter_ranges{'.' + name if name else ''}"
    return f"training_job.{path}"


def _sample(rng: ParameterRange, index: int) -> Any:
    if rng.values is not None:
        return rng.values[index % len(rng.values)]
    bound = rng.max_value if index % 2 else rng.min_value
    return int(bound or 0) if rng.type is ParameterType.INTEGER else bound


def _check_strategy(config: TuningJobConfig) -> Problems:
    if config.strategy_config is not None and config.strategy is not Strategy.HYPERBAND:
        return [("strategy_config", f"only Hyperband takes one, not {config.strategy.value}")]
    if config.strategy is Strategy.GRID:
        return _check_grid(config)
    if config.strategy is not Strategy.HYPERBAND:
        return []
    if config.training_job_early_stopping_type is EarlyStoppingType.AUTO:
        return [(
            "training_job_early_stopping_type",
            "Hyperband stops trials itself: set Off (SageMaker refuses Auto with Hyperband)",
        )]  # fmt: skip
    resource = _hyperband_resource(config)
    return [resource] if isinstance(resource, tuple) else []


def _check_grid(config: TuningJobConfig) -> Problems:
    return [
        (
            f"hyperparameter_ranges.{name}",
            f"Grid takes Categorical ranges only, not {rng.type.value}: list the values to "
            "try (e.g. [0.01, 0.1]) or use strategy: Bayesian",
        )
        for name, rng in sorted(config.hyperparameter_ranges.items())
        if rng.type is not ParameterType.CATEGORICAL
    ]


def _check_job_limit(config: TuningJobConfig) -> Problems:
    field = "resource_limits.max_number_of_training_jobs"
    limit = config.resource_limits.max_number_of_training_jobs
    if config.strategy is Strategy.GRID:
        if any(
            r.type is not ParameterType.CATEGORICAL for r in config.hyperparameter_ranges.values()
        ):
            return []  # the Grid check says why
        combinations = grid_size(config.hyperparameter_ranges)
        if limit is not None and limit != combinations:
            return [(field, f"Grid runs every combination ({combinations}); omit it or set "
                            f"it to {combinations}")]  # fmt: skip
        limit = combinations
    if limit is None:
        return [(field, "required (except with Grid), e.g. 20")]
    most = MAX_RANDOM_TRAINING_JOBS if config.strategy is Strategy.RANDOM else MAX_TRAINING_JOBS
    if limit > most:
        return [
            (field, f"{limit} trials; the {config.strategy.value} strategy runs at most {most}")
        ]
    return []


def _hyperband_resource(config: TuningJobConfig) -> HyperbandResource | tuple[str, str]:
    """Hyperband's resource, or why it cannot be known."""
    settings = (config.strategy_config or StrategyConfig()).hyperband_strategy_config
    static = config.training_job.hyperparameters
    name = settings.resource_hyperparameter or next((n for n in EPOCHS_NAMES if n in static), None)
    if name is not None and name in config.hyperparameter_ranges:
        return (
            f"hyperparameter_ranges.{name}",
            "Hyperband's resource cannot be tuned: remove the range, set it as a static one",
        )
    maximum = settings.max_resource
    if maximum is None and name is not None and name in static:
        maximum = _whole_number(static[name])
        if maximum is None or not 1 <= maximum <= 20_000:
            return (f"training_job.hyperparameters.{name}", "Hyperband's resource must be 1-20000")
    if maximum is None:
        return (
            "strategy_config.hyperband_strategy_config.max_resource",
            "Hyperband needs it: set it, or a static hyperparameter epochs in training_job",
        )
    return _resource(name, settings, maximum)


def _resource(
    name: str | None, settings: HyperbandStrategyConfig, maximum: int
) -> HyperbandResource | tuple[str, str]:
    if settings.min_resource > maximum:
        return (
            "strategy_config.hyperband_strategy_config.min_resource",
            f"{settings.min_resource} is above the max_resource {maximum}",
        )
    return HyperbandResource(
        hyperparameter=name,
        min_resource=settings.min_resource,
        max_resource=maximum,
        reduction_factor=settings.reduction_factor,
    )


def _whole_number(value: Any) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def load_tuning_config(path: str | Path) -> TuningJobConfig:
    """Read and validate a tuning job's YAML at ``path``; problems name the field and line.

    ``training_job`` is a job spec file (relative to ``path``) or an inline job spec; local
    paths in it are resolved against the folder of the file that declares them.
    """
    path = Path(path)
    source = str(path)
    data, lines = read_spec_yaml(
        read_spec_text(path), source, "a tuning job must be a mapping, e.g. 'strategy: Random'"
    )
    job = data.get("training_job")
    base = path.resolve().parent
    if isinstance(job, str):
        data["training_job"] = load_spec(base / job)
    try:
        config = TuningJobConfig(**data)
    except SpecError as exc:
        raise with_lines(exc.problems, lines, source) from None
    if not isinstance(job, str):
        resolved = resolve_paths(config.training_job, base, source)
        config = config.model_copy(update={"training_job": resolved})
    return config
