"""A minimal tuning declaration and Random search, standing in for :mod:`trainops.tuning`.

The tuner service needs only what :class:`TuningPlan` exposes and a search with
``ask() / should_stop() / tell() / completed()`` rebuilt from the recorded trials (the
interface the tuning library provides). Until that library is wired in, this module declares
the few fields the service reads and proposes hyperparameters by seeded random sampling: the
proposal for trial ``n`` depends only on the seed and ``n``, so a search rebuilt after a crash
proposes exactly what an uninterrupted one would have. Early stopping ``Auto`` is SageMaker's
median rule over running averages at the same epoch.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from trainops._errors import SpecError
from trainops.spec import JobSpec

__all__ = ["Proposal", "RandomSearch", "TrialView", "TuningPlan", "parse_plan"]

_NAME = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,31}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Objective(_Model):
    """``HyperParameterTuningJobObjective``: a metric of the training job's definitions."""

    type: Literal["Maximize", "Minimize"]
    metric_name: str = Field(min_length=1)


class ParameterRange(_Model):
    """One tuned hyperparameter (Continuous, Integer or Categorical)."""

    type: Literal["Continuous", "Integer", "Categorical"]
    min_value: float | None = None
    max_value: float | None = None
    values: list[str] | None = None
    scaling_type: Literal["Auto", "Linear", "Logarithmic"] = "Auto"

    @model_validator(mode="after")
    def _bounds(self) -> ParameterRange:
        if self.type == "Categorical":
            if not self.values:
                raise ValueError("a Categorical range needs values")
        elif self.min_value is None or self.max_value is None or self.min_value > self.max_value:
            raise ValueError("min_value and max_value are needed, min_value <= max_value")
        elif self.scaling_type == "Logarithmic" and self.min_value <= 0:
            raise ValueError("Logarithmic scaling needs min_value > 0")
        return self


class TuningPlan(_Model):
    """What the tuner reads of a tuning job's declaration."""

    name: str = Field(pattern=_NAME)
    training_job: dict[str, Any]
    objective: Objective
    hyperparameter_ranges: dict[str, ParameterRange] = Field(min_length=1, max_length=30)
    static_hyperparameters: dict[str, Any] = Field(default_factory=dict)
    strategy: Literal["Random"] = "Random"
    max_number_of_training_jobs: int = Field(ge=1, le=10000)
    max_parallel_training_jobs: int = Field(default=1, ge=1, le=100)
    random_seed: int = 0
    training_job_early_stopping_type: Literal["Off", "Auto"] = "Off"

    @model_validator(mode="after")
    def _objective_defined(self) -> TuningPlan:
        names = [d.get("name") for d in self.training_job.get("metric_definitions", [])]
        if self.objective.metric_name not in names:
            raise ValueError(
                f"objective metric {self.objective.metric_name!r} has no metric definition in "
                "training_job.metric_definitions: add one with its regex"
            )
        return self

    def job_spec(self, hyperparameters: dict[str, str]) -> JobSpec:
        """The training job of one trial: static, tuned and the objective's name."""
        tuned = {
            **self.static_hyperparameters,
            **{k: _as_passed(v) for k, v in hyperparameters.items()},
        }
        tuned["_tuning_objective_metric"] = self.objective.metric_name
        fields = {**self.training_job, "hyperparameters": tuned, "job_name": None}
        return JobSpec.model_validate(fields, context={"tuning_trial": True})

    def better(self, value: float, than: float) -> bool:
        return value > than if self.objective.type == "Maximize" else value < than


def parse_plan(config: dict[str, Any]) -> TuningPlan:
    """The plan of ``config``, or :class:`SpecError` naming each bad field."""
    try:
        plan = TuningPlan(**config)
        plan.job_spec({})
    except ValidationError as exc:
        raise SpecError(
            [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors()]
        ) from None
    except SpecError as exc:
        raise SpecError([(f"training_job.{f}", why) for f, why in exc.problems]) from None
    return plan


@dataclass(frozen=True, slots=True)
class Proposal:
    """The next trial: its number and the tuned values as the script receives them."""

    number: int
    hyperparameters: dict[str, str]


@dataclass(frozen=True, slots=True)
class TrialView:
    """A recorded trial as the search sees it."""

    number: int
    hyperparameters: dict[str, str]
    status: str
    objective: float | None
    intermediate: Sequence[float]
    counted: bool = True


class RandomSearch:
    """Seeded random sampling, rebuilt from the recorded trials (nothing is kept elsewhere)."""

    def __init__(self, plan: TuningPlan, records: Sequence[TrialView]) -> None:
        self.plan = plan
        self.records = {r.number: r for r in records}
        self._next = max(self.records, default=0) + 1
        self._counted = sum(1 for r in self.records.values() if r.counted)

    def ask(self) -> Proposal | None:
        """The next trial, or None once the maximum number of trials has been proposed."""
        if self._counted >= self.plan.max_number_of_training_jobs:
            return None
        self._counted += 1
        number, self._next = self._next, self._next + 1
        rng = random.Random(f"{self.plan.random_seed}:{number}")
        values = {
            name: _sample(r, rng) for name, r in sorted(self.plan.hyperparameter_ranges.items())
        }
        return Proposal(number, values)

    def should_stop(self, trial: int, step: int, value: float) -> bool:
        """The median rule: stop when ``value`` (the trial's objective at ``step``, from 0) is
        worse than the median of the other trials' running averages up to the same step."""
        if self.plan.training_job_early_stopping_type != "Auto":
            return False
        others = [
            statistics.fmean(r.intermediate[: step + 1])
            for n, r in self.records.items()
            if n != trial and len(r.intermediate) > step
        ]
        if len(others) < 2:
            return False
        return self.plan.better(statistics.median(others), value)

    def tell(self, trial: int, status: str, objective: float | None) -> None:
        del trial, status, objective  # random sampling learns nothing

    def completed(self, records: Sequence[TrialView]) -> str | None:
        del records
        return None


def _as_passed(value: str) -> Any:
    """A tuned value as SageMaker writes it to hyperparameters.json: its text unquoted. Job specs
    JSON-encode their values, so a number's text is passed as that number (its encoding is the
    same text); any other text stays a string."""
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    if isinstance(decoded, int | float) and not isinstance(decoded, bool):
        return decoded if json.dumps(decoded) == value else value
    return value


def _sample(r: ParameterRange, rng: random.Random) -> str:
    if r.values is not None:
        return rng.choice(r.values)
    low, high = float(r.min_value or 0), float(r.max_value or 0)
    if r.scaling_type == "Logarithmic":
        drawn = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        drawn = rng.uniform(low, high)
    if r.type == "Integer":
        return str(min(int(high), max(int(low), round(drawn))))
    return repr(drawn)
