"""The checks of a whole tuning job's config, across its fields: objective, counts, strategy,
job limit, Hyperband's resource and the trials' hyperparameters. Each returns the problems it
finds as ``(field path, reason with the fix)`` pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainops._errors import SpecError
from trainops.protocol import RESERVED_HYPERPARAMETERS
from trainops.spec import JobSpec
from trainops.tuning._limits import (
    EarlyStoppingType,
    HyperbandResource,
    HyperbandStrategyConfig,
    Strategy,
    StrategyConfig,
)
from trainops.tuning._space import ParameterRange, ParameterType, grid_size

if TYPE_CHECKING:
    from trainops.tuning._config import TuningJobConfig

__all__ = [
    "CONFIG_CHECKS",
    "MAX_RANGES",
    "check_tuned_name",
    "hyperband_resource",
]

MAX_RANGES = 30
MAX_HYPERPARAMETERS = 100
MAX_METRICS = 20
MAX_TRAINING_JOBS = 750
MAX_RANDOM_TRAINING_JOBS = 10_000
EPOCHS_NAMES = ("epochs", "numepochs", "n-epochs", "n_epochs", "num_epochs")
Problems = list[tuple[str, str]]


def check_tuned_name(name: str) -> None:
    if not name or len(name) > 256:
        raise ValueError(f"name {name!r} must be 1-256 characters")
    if "=" in name or "\x00" in name:
        raise ValueError(f"name {name!r} must not contain '=' or NUL")
    if name in RESERVED_HYPERPARAMETERS:
        raise ValueError(f"{name!r} is reserved: SageMaker and trainops set it")


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
    resource = hyperband_resource(config)
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


def hyperband_resource(config: TuningJobConfig) -> HyperbandResource | tuple[str, str]:
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


CONFIG_CHECKS = (
    _check_objective,
    _check_counts,
    _check_strategy,
    _check_job_limit,
    _check_trial_hyperparameters,
)
