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

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from trainops._errors import SpecError
from trainops.spec import JobSpec
from trainops.spec._base import SpecModel
from trainops.spec._lines import read_spec_text, read_spec_yaml, with_line, with_lines
from trainops.spec._load import load_spec, resolve_paths
from trainops.tuning._checks import (
    CONFIG_CHECKS,
    MAX_RANGES,
    check_tuned_name,
    hyperband_resource,
)
from trainops.tuning._limits import (
    CompletionCriteria,
    EarlyStoppingType,
    HyperbandResource,
    ResourceLimits,
    Strategy,
    StrategyConfig,
    TuningObjective,
    WarmStartConfig,
    canonical,
    check_tuning_job_name,
)
from trainops.tuning._space import ParameterRange, grid_size

__all__ = ["HyperbandResource", "Strategy", "TuningJobConfig", "load_tuning_config"]

# Strategy and HyperbandResource live in _limits (the checks need them); named here too.


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
            check_tuned_name(name)
        return value

    @model_validator(mode="after")
    def _whole(self) -> TuningJobConfig:
        # Raised as a SpecError (pydantic lets it through) so each problem keeps its field.
        problems = [problem for check in CONFIG_CHECKS for problem in check(self)]
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
        resource = hyperband_resource(self) if self.strategy is Strategy.HYPERBAND else None
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
        resource = hyperband_resource(self)
        assert isinstance(resource, HyperbandResource)
        return resource


def load_tuning_config(path: str | Path) -> TuningJobConfig:
    """Read and validate a tuning job's YAML at ``path``; problems name the field and line.

    ``training_job`` is a job spec file (relative to ``path``) or an inline job spec; local
    paths in it are resolved against the folder of the file that declares them.
    """
    path = Path(path)
    source = str(path)
    _check_regular_file(path, "", source)
    data, lines = read_spec_yaml(
        read_spec_text(path), source, "a tuning job must be a mapping, e.g. 'strategy: Random'"
    )
    job = data.get("training_job")
    base = path.resolve().parent
    if isinstance(job, str):
        _check_regular_file(base / job, with_line("training_job", lines), source)
        data["training_job"] = load_spec(base / job)
    try:
        config = TuningJobConfig(**data)
    except SpecError as exc:
        raise with_lines(exc.problems, lines, source) from None
    if not isinstance(job, str):
        resolved = resolve_paths(config.training_job, base, source)
        config = config.model_copy(update={"training_job": resolved})
    return config


def _check_regular_file(path: Path, field: str, source: str) -> None:
    """Refuse what is not a regular file (a device such as /dev/zero would never end)."""
    if path.exists() and not path.is_file():
        raise SpecError([(field, f"{path} is not a regular file")], source)
