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

from trainops._errors import TUNING_JOB, SpecError
from trainops.spec import JobSpec
from trainops.spec._base import SpecModel
from trainops.spec._lines import read_spec_text, read_spec_yaml, with_lines
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

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except SpecError as exc:  # a job spec's heading: said of the tuning job instead
            raise SpecError(exc.problems, exc.source, subject=TUNING_JOB) from None

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

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
    paths in it are resolved against the folder of the file that declares them. A refusal is a
    :class:`SpecError` headed ``invalid tuning job in <path>``; a problem of a job spec file is
    said as ``training_job.<field> (job.yaml line N)``, at its line in that file.
    """
    path = Path(path)
    source = str(path)
    try:
        _check_regular_file(path)
        data, lines = read_spec_yaml(
            read_spec_text(path), source, "a tuning job must be a mapping, e.g. 'strategy: Random'"
        )
    except SpecError as exc:
        raise SpecError(exc.problems, source, subject=TUNING_JOB) from None
    return _validated(data, lines, path.resolve().parent, source)


def _validated(
    data: dict[str, Any], lines: dict[str, int], base: Path, source: str
) -> TuningJobConfig:
    job = data.get("training_job")
    try:
        if isinstance(job, str):
            _check_regular_file(base / job, must_exist=True)
    except SpecError as exc:
        raise _refusal([("training_job", why) for _, why in exc.problems], lines, source) from None
    if isinstance(job, str):
        data["training_job"] = _job_file(base / job, job, lines, source)
    try:
        config = TuningJobConfig(**data)
    except SpecError as exc:
        raise _refusal(exc.problems, lines, source) from None
    if isinstance(job, str):
        return config
    try:
        resolved = resolve_paths(config.training_job, base)
    except SpecError as exc:  # the inline job's code: its fields are under training_job
        inline = [(f"training_job.{path}".rstrip("."), why) for path, why in exc.problems]
        raise _refusal(inline, lines, source) from None
    return config.model_copy(update={"training_job": resolved})


def _job_file(path: Path, named: str, lines: dict[str, int], source: str) -> JobSpec:
    """The job spec file ``training_job:`` names, loaded; its refusal is the tuning job's, each
    field as ``training_job.<field>`` at its line in that file (``(job.yaml line 4)``)."""
    try:
        return load_spec(path)
    except SpecError as exc:
        shown = _printable(named)
        problems = [_in_job_file(field, why, shown) for field, why in exc.problems]
    where = f"training_job (line {lines['training_job']})" if "training_job" in lines else ""
    problems = [(field or where or "training_job", why) for field, why in problems]
    raise SpecError(problems, source, subject=TUNING_JOB)


def _in_job_file(field: str, why: str, shown: str) -> tuple[str, str]:
    """One problem of the job spec file as the tuning job's: ``training_job.<field> (<file>
    line N)``; a problem of the file as a whole is said of ``training_job`` (field ``""``)."""
    if not field:
        return "", f"{shown}: {why}"
    name, _, line = field.partition(" (line ")
    return f"training_job.{name} ({shown}{f' line {line}' if line else ')'}", why


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _refusal(problems: list[tuple[str, str]], lines: dict[str, int], source: str) -> SpecError:
    """A tuning job's refusal about ``source`` whose field paths carry their lines."""
    return SpecError(with_lines(problems, lines, source).problems, source, subject=TUNING_JOB)


def _check_regular_file(path: Path, *, must_exist: bool = False) -> None:
    """Refuse what is not a regular file (a device such as /dev/zero would never end)."""
    try:
        exists, regular = path.exists(), path.is_file()
    except (OSError, ValueError) as exc:  # a NUL in the name, a name too long
        raise SpecError([("", f"cannot read {str(path)!r}: {exc}")]) from None
    if exists and not regular:
        raise SpecError([("", f"{path} is not a regular file")])
    if must_exist and not exists:
        raise SpecError([("", f"no job spec file {str(path)!r}")])
