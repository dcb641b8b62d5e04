"""A tuning job's analysis as data: objective per trial with the best so far, one slice per
tuned parameter, parameter importance, each trial's cost and the total, and the compute early
stopping saved. Rendering (PNG, HTML, the web UI) reads this data and computes nothing.

Compute saved by early stopping, estimated: a trial stopped by the search's rule (Hyperband or
the median rule; not one stopped because the tuning job ended) would have run to the *budget*:
Hyperband's ``max_resource`` steps; otherwise the most objective values a Completed trial of
the job reported, else the epochs-like static hyperparameter (``epochs``, ``num_epochs``, ...).
Its saved steps are the budget less the steps it ran; its saved seconds are those steps at its
own measured pace (seconds between its first and last objective value per step; for a trial
stopped after one value, the median pace of the trials that measured one, else its billed
seconds per step); its saved cost is those seconds at its instances' rate.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from trainops.tuning._checks import EPOCHS_NAMES
from trainops.tuning._config import TuningJobConfig
from trainops.tuning._limits import ObjectiveType
from trainops.tuning._records import TunedValue
from trainops.tuning._space import ParameterType, effective_scaling
from trainops.tuning.analysis._facts import TrialFacts
from trainops.tuning.analysis._importance import Importance, importances

__all__ = [
    "IMPORTANCE_METHOD",
    "EarlyStoppingSavings",
    "Slice",
    "SlicePoint",
    "TrialPoint",
    "TuningAnalysis",
    "analyse",
    "step_budget",
]

IMPORTANCE_METHOD = (
    "adjusted correlation ratio (epsilon squared) of the Completed trials' objective over "
    "each parameter's values or sqrt(n) equal-count bins, normalised to sum to 1"
)


@dataclass(frozen=True)
class TrialPoint:
    """One trial in the analysis: what it reached, the best so far, what it cost and saved."""

    number: int
    training_job: str
    status: str
    hyperparameters: dict[str, TunedValue]
    objective: float | None
    best_so_far: float | None
    early_stopped: bool
    steps: int
    seconds: float
    cost_usd: float
    saved_steps: int
    saved_seconds: float
    saved_cost_usd: float


@dataclass(frozen=True)
class SlicePoint:
    """One trial's value of a parameter and its objective."""

    value: TunedValue
    objective: float
    number: int
    status: str


@dataclass(frozen=True)
class Slice:
    """The objective against one tuned parameter (``scale``: its effective scaling, or
    ``Categorical``)."""

    parameter: str
    scale: str
    points: list[SlicePoint]


@dataclass(frozen=True)
class EarlyStoppingSavings:
    """What the trials stopped by the search's rule did not run (see the module's docs)."""

    budget_steps: int | None
    budget_source: str
    stopped_trials: int
    saved_steps: int
    saved_seconds: float
    saved_cost_usd: float
    spent_seconds: float

    @property
    def saved_share(self) -> float | None:
        """Saved seconds over what all trials would have taken without early stopping."""
        whole = self.spent_seconds + self.saved_seconds
        return self.saved_seconds / whole if whole > 0 else None


@dataclass(frozen=True)
class TuningAnalysis:
    """Everything the report shows of one tuning job."""

    name: str
    metric_name: str
    objective_type: str
    currency: str
    trials: list[TrialPoint]
    slices: list[Slice]
    importance: list[Importance]
    importance_trials: int
    total_seconds: float
    total_cost_usd: float
    early_stopping: EarlyStoppingSavings

    def best(self) -> TrialPoint | None:
        """The trial with the best objective (the first of equals)."""
        scored = [t for t in self.trials if t.objective is not None and math.isfinite(t.objective)]
        if not scored:
            return None
        sign = -1.0 if self.objective_type == ObjectiveType.MAXIMIZE.value else 1.0
        return min(scored, key=lambda t: (sign * (t.objective or 0.0), t.number))

    def to_json(self) -> dict[str, Any]:
        """The data as plain JSON (what the REST route and the web UI serve); a value that is
        not a finite number (a script that reported ``nan``) is ``null``."""
        data = asdict(self)
        data["importance_method"] = IMPORTANCE_METHOD
        data["early_stopping"]["saved_share"] = self.early_stopping.saved_share
        finite: dict[str, Any] = _finite(data)
        return finite

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuningAnalysis:
        """The analysis :meth:`to_json` gave (as a client reads it from the REST route); keys
        this version does not know (a newer server's) are left out. A ``KeyError`` or
        ``TypeError`` says the data is not an analysis."""
        fields = _known(cls, data)
        return cls(
            **{**fields, "trials": [TrialPoint(**_known(TrialPoint, t)) for t in fields["trials"]],
               "slices": [Slice(s["parameter"], s["scale"],
                                [SlicePoint(**_known(SlicePoint, p)) for p in s["points"]])
                          for s in fields["slices"]],
               "importance": [Importance(**_known(Importance, i)) for i in fields["importance"]],
               "early_stopping": EarlyStoppingSavings(
                   **_known(EarlyStoppingSavings, fields["early_stopping"]))},
        )  # fmt: skip


def _known(kind: type, data: dict[str, Any]) -> dict[str, Any]:
    """The items of ``data`` that are fields of dataclass ``kind``."""
    names = {f.name for f in dataclasses.fields(kind)}
    return {k: v for k, v in data.items() if k in names}


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def step_budget(config: TuningJobConfig, trials: Sequence[TrialFacts]) -> tuple[int | None, str]:
    """How many steps a trial runs when nothing stops it, and where that figure comes from."""
    resource = config.hyperband_resource()
    if resource is not None:
        return resource.max_resource, "Hyperband's max_resource"
    completed = [t.steps for t in trials if t.status == "Completed" and t.steps > 0]
    if completed:
        return max(completed), "the most objective values a Completed trial reported"
    static = config.static_hyperparameters
    for name in EPOCHS_NAMES:
        value = static.get(name)
        if isinstance(value, int | float | str) and str(value).isdigit() and int(value) > 0:
            return int(value), f"the static hyperparameter {name}"
    return None, "unknown: no trial completed and no static hyperparameter names the epochs"


def _paces(trials: Sequence[TrialFacts]) -> dict[int, float]:
    """Each trial's seconds per step: measured, else the median measured one, else billed."""
    measured = [t.seconds_per_step for t in trials if t.seconds_per_step is not None]
    fallback = statistics.median(measured) if measured else None
    paces = {}
    for t in trials:
        pace = t.seconds_per_step if t.seconds_per_step is not None else fallback
        if pace is None and t.steps > 0:
            pace = t.seconds / t.steps
        paces[t.number] = pace or 0.0
    return paces


def _points(
    config: TuningJobConfig, trials: Sequence[TrialFacts], budget: int | None
) -> list[TrialPoint]:
    better = config.objective.better
    paces = _paces(trials)
    best: float | None = None
    points = []
    for t in sorted(trials, key=lambda t: t.number):
        finite = t.objective is not None and math.isfinite(t.objective)
        if finite and (best is None or better(t.objective or 0.0, best)):
            best = t.objective
        saved = max(0, budget - t.steps) if t.early_stopped and budget is not None else 0
        seconds = saved * paces[t.number]
        points.append(
            TrialPoint(
                number=t.number,
                training_job=t.training_job,
                status=t.status,
                hyperparameters=dict(t.hyperparameters),
                objective=t.objective,
                best_so_far=best,
                early_stopped=t.early_stopped,
                steps=t.steps,
                seconds=t.seconds,
                cost_usd=t.cost_usd,
                saved_steps=saved,
                saved_seconds=seconds,
                saved_cost_usd=seconds * t.usd_per_second,
            )
        )
    return points


def _slices(config: TuningJobConfig, trials: Sequence[TrialFacts]) -> list[Slice]:
    scored = [
        t
        for t in sorted(trials, key=lambda t: t.number)
        if t.objective is not None and math.isfinite(t.objective)
    ]
    found = []
    for name, rng in sorted(config.hyperparameter_ranges.items()):
        scale = (
            "Categorical" if rng.type is ParameterType.CATEGORICAL else effective_scaling(rng).value
        )
        points = [
            SlicePoint(t.hyperparameters[name], t.objective or 0.0, t.number, t.status)
            for t in scored
            if name in t.hyperparameters
        ]
        found.append(Slice(name, scale, points))
    return found


def _importance(
    config: TuningJobConfig, trials: Sequence[TrialFacts]
) -> tuple[list[Importance], int]:
    completed = [
        t
        for t in trials
        if t.status == "Completed" and t.objective is not None and math.isfinite(t.objective)
    ]
    names = sorted(config.hyperparameter_ranges)
    usable = [t for t in completed if all(n in t.hyperparameters for n in names)]
    columns = {
        name: (
            [t.hyperparameters[name] for t in usable],
            config.hyperparameter_ranges[name].type is ParameterType.CATEGORICAL,
        )
        for name in names
    }
    return importances(columns, [t.objective or 0.0 for t in usable]), len(usable)


def _savings(trials: Sequence[TrialPoint], budget: int | None, source: str) -> EarlyStoppingSavings:
    stopped = [t for t in trials if t.early_stopped]
    return EarlyStoppingSavings(
        budget_steps=budget,
        budget_source=source,
        stopped_trials=len(stopped),
        saved_steps=sum(t.saved_steps for t in stopped),
        saved_seconds=sum(t.saved_seconds for t in stopped),
        saved_cost_usd=sum(t.saved_cost_usd for t in stopped),
        spent_seconds=sum(t.seconds for t in trials),
    )


def analyse(
    name: str, config: TuningJobConfig, trials: Sequence[TrialFacts], currency: str = "USD"
) -> TuningAnalysis:
    """The analysis of tuning job ``name`` from its ``trials``' facts."""
    budget, source = step_budget(config, trials)
    points = _points(config, trials, budget)
    ranked, used = _importance(config, trials)
    return TuningAnalysis(
        name=name,
        metric_name=config.objective.metric_name,
        objective_type=config.objective.type.value,
        currency=currency,
        trials=points,
        slices=_slices(config, trials),
        importance=ranked,
        importance_trials=used,
        total_seconds=sum(t.seconds for t in points),
        total_cost_usd=sum(t.cost_usd for t in points),
        early_stopping=_savings(points, budget, source),
    )
