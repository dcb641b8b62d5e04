"""The Optuna study behind a search, driven by ask-and-tell and rebuilt from trial records.

Each range becomes an Optuna distribution on its scale (a ReverseLogarithmic range is searched
as ``1 - x`` on a log scale). The study is in memory and never saved: :meth:`Engine.replay`
re-adds recorded trials in their order (hyperparameters fixed, intermediate values reported,
the outcome told), which is all the samplers learn from.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from trainops.tuning._local import is_local_turn, local_step
from trainops.tuning._records import TrialRecord, TrialStatus, TunedValue
from trainops.tuning._space import ParameterRange, ParameterType, ScalingType, effective_scaling
from trainops.tuning._strategies import SearchStrategy

if TYPE_CHECKING:
    from optuna.trial import Trial

__all__ = ["Engine", "import_optuna", "trial_seed"]

_INSTALL_HINT = "tuning needs Optuna: pip install 'trainops[tuning]'"


def import_optuna() -> Any:
    """The ``optuna`` module (quiet), or an ImportError that says how to install it."""
    try:
        import optuna
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    optuna.logging.set_verbosity(logging.ERROR)
    return optuna


#: A trial's draws that repeat one of this job's trials are drawn again: first by the strategy's
#: sampler, then uniformly at random; past both, the last draw is taken even if it repeats.
MODEL_DRAWS = 8
MAX_DRAWS = 24
LOCAL_DRAW = 99  # the draw index that seeds a local step (past every redraw's)


def trial_seed(seed: int, number: int, draw: int = 0) -> int:
    """The sampler seed of draw ``draw`` of trial ``number``: fixed by the job's seed, the
    number and the draw alone (the first draw's is the seed trials had before redraws)."""
    key = f"{seed}:{number}" if draw == 0 else f"{seed}:{number}:{draw}"
    return zlib.crc32(key.encode())


def _distribution(rng: ParameterRange) -> Any:
    optuna = import_optuna()
    dists = optuna.distributions
    if rng.type is ParameterType.CATEGORICAL:
        return dists.CategoricalDistribution(list(rng.values or ()))
    assert rng.min_value is not None and rng.max_value is not None
    scaling = effective_scaling(rng)
    log = scaling is not ScalingType.LINEAR
    if rng.type is ParameterType.INTEGER:
        return dists.IntDistribution(int(rng.min_value), int(rng.max_value), log=log)
    if scaling is ScalingType.REVERSE_LOGARITHMIC:
        return dists.FloatDistribution(1.0 - rng.max_value, 1.0 - rng.min_value, log=True)
    return dists.FloatDistribution(rng.min_value, rng.max_value, log=log)


def _reversed(rng: ParameterRange) -> bool:
    return effective_scaling(rng) is ScalingType.REVERSE_LOGARITHMIC


class Engine:
    """An in-memory Optuna study over ``ranges`` for one tuning job."""

    def __init__(
        self,
        ranges: Mapping[str, ParameterRange],
        strategy: SearchStrategy,
        maximize: bool,
        seed: int,
    ) -> None:
        optuna = import_optuna()
        self.ranges = dict(ranges)
        self.strategy = strategy
        self.seed = seed
        self.distributions = {name: _distribution(rng) for name, rng in self.ranges.items()}
        self.size = _size(self.distributions.values())  # configurations, if finitely many
        direction = "maximize" if maximize else "minimize"
        self.study = optuna.create_study(study_name=strategy.study_name, direction=direction)
        self.trials: dict[int, Trial] = {}
        self.taken: set[tuple[tuple[str, Any], ...]] = set()  # the trials' configurations
        self.curves: dict[int, dict[int, float]] = {}

    def ask(self, number: int) -> dict[str, TunedValue]:
        """Sample trial ``number``'s hyperparameters (a fixed set for Grid)."""
        fixed = self.strategy.fixed(number)
        if fixed is not None:
            return self._start(number, fixed)
        local = self._local(number)
        if local is not None:
            return self._start(number, self._decode(local))
        taken = self.taken
        draws = 1 if self.size is not None and len(taken) >= self.size else MAX_DRAWS
        for draw in range(draws):
            self.study.sampler = self._sampler(trial_seed(self.seed, number, draw), number, draw)
            trial = self.study.ask(self.distributions)
            if _key(trial.params) not in taken or draw == draws - 1:
                break
            self._discard(trial)
        self.trials[number] = trial
        self.curves[number] = {}
        values = self._decode(trial.params)
        self._round_trip(trial, values)
        taken.add(_key(trial.params))
        return values

    def _local(self, number: int) -> dict[str, Any] | None:
        """Trial ``number`` as a local step from the best trial (trainops.tuning._local), or
        ``None``: not the strategy's way, not a finite space, not its turn, or no step left."""
        if self.size is None or not is_local_turn(number) or not self.strategy.local_steps():
            return None
        seed = trial_seed(self.seed, number, LOCAL_DRAW)
        return local_step(self.study, self.distributions, self.taken, seed)

    def _sampler(self, seed: int, number: int, draw: int) -> Any:
        if draw < MODEL_DRAWS:
            return self.strategy.trial_sampler(seed, number)
        return import_optuna().samplers.RandomSampler(seed=seed)

    def _discard(self, trial: Trial) -> None:
        """Drop a draw that repeats a trial of this job: told failed, which no sampler learns
        from, so the study samples as a rebuilt one (which never saw the draw) does."""
        self.study.tell(trial, state=import_optuna().trial.TrialState.FAIL)

    def _round_trip(self, trial: Trial, values: Mapping[str, TunedValue]) -> None:
        """Store a ReverseLogarithmic value as a replay will (``1 - x``, not the sampled ``y``:
        ``1 - (1 - y)`` may differ from ``y`` in the last bit), so that a rebuilt study holds
        exactly the same trials. Optuna has no public way to set a sampled value."""
        for name, value in values.items():
            if _reversed(self.ranges[name]):
                dist = self.distributions[name]
                internal = dist.to_internal_repr(self._encode_one(name, value))
                self.study._storage.set_trial_param(trial._trial_id, name, internal, dist)

    def _start(self, number: int, values: Mapping[str, TunedValue]) -> dict[str, TunedValue]:
        """Add trial ``number`` with its hyperparameters fixed to ``values``."""
        optuna = import_optuna()
        self.study.sampler = optuna.samplers.RandomSampler(seed=0)
        params = self._encode(values)
        self.study.enqueue_trial(params)
        trial = self.study.ask({k: self.distributions[k] for k in params})
        self.trials[number] = trial
        self.taken.add(_key(trial.params))
        self.curves[number] = {}
        return dict(values)

    def report(self, number: int, step: int, value: float) -> None:
        """Record trial ``number``'s objective ``value`` at ``step`` (once per step)."""
        curve = self.curves[number]
        if step not in curve:
            curve[step] = value
            self.trials[number].report(value, step)

    def tell(self, number: int, status: TrialStatus, objective: float | None) -> None:
        """End trial ``number`` as ``status`` (``objective`` is its final value)."""
        state = import_optuna().trial.TrialState
        trial = self.trials[number]
        if status is TrialStatus.COMPLETED and objective is not None and math.isfinite(objective):
            self.study.tell(trial, objective)
        elif status is TrialStatus.STOPPED and self.curves[number]:
            self.study.tell(trial, state=state.PRUNED)
        else:
            self.study.tell(trial, state=state.FAIL)

    def replay(self, record: TrialRecord) -> None:
        """Re-add a recorded trial of this job: hyperparameters, curve and outcome (a
        ValueError when its hyperparameters are not a point of this job's ranges)."""
        problem = self.misfit(record.hyperparameters)
        if problem is not None:
            raise ValueError(f"trial {record.number}: {problem}")
        self._start(record.number, record.hyperparameters)
        for step, value in sorted(record.intermediate_values.items()):
            self.report(record.number, step, value)
        if record.status.finished:
            self.tell(record.number, record.status, record.objective)

    def misfit(self, values: Mapping[str, TunedValue]) -> str | None:
        """Why ``values`` are not one point of the ranges, or ``None``."""
        if set(values) != set(self.ranges):
            return f"hyperparameters {sorted(values)} are not the tuned ones {sorted(self.ranges)}"
        outside = sorted(name for name, value in values.items() if not self._fits(name, value))
        return f"{', '.join(outside)} outside their ranges" if outside else None

    def _fits(self, name: str, value: TunedValue) -> bool:
        rng = self.ranges[name]
        if not _reversed(rng):
            return _fits(self.distributions[name], value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        assert rng.min_value is not None and rng.max_value is not None
        return rng.min_value <= value <= rng.max_value

    def add_prior(self, record: TrialRecord) -> bool:
        """Add a parent job's finished trial as a prior one; whether it fit this space."""
        optuna = import_optuna()
        value = record.counted_objective
        params = self._encode_fitting(record.hyperparameters)
        if value is None or not math.isfinite(value) or not params:
            return False
        self.study.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions={k: self.distributions[k] for k in params},
                value=value,
                intermediate_values=dict(record.intermediate_values),
            )
        )
        return True

    def _encode(self, values: Mapping[str, TunedValue]) -> dict[str, Any]:
        return {name: self._encode_one(name, value) for name, value in values.items()}

    def _encode_one(self, name: str, value: TunedValue) -> Any:
        if not _reversed(self.ranges[name]) or isinstance(value, str | bool):
            return value
        dist = self.distributions[name]  # 1 - (1 - y) may leave the range by a rounding step
        return min(max(1.0 - float(value), dist.low), dist.high)

    def _encode_fitting(self, values: Mapping[str, TunedValue]) -> dict[str, Any]:
        """The ``values`` that are tuned here and inside this job's ranges, encoded."""
        return {
            name: self._encode_one(name, value)
            for name, value in values.items()
            if name in self.ranges and self._fits(name, value)
        }

    def _decode(self, params: Mapping[str, Any]) -> dict[str, TunedValue]:
        return {
            name: 1.0 - float(value) if _reversed(self.ranges[name]) else value
            for name, value in params.items()
        }


def _size(distributions: Iterable[Any]) -> int | None:
    """How many configurations the ``distributions`` span (``None``: a Continuous one)."""
    size = 1
    for dist in distributions:
        if hasattr(dist, "choices"):
            size *= len(dist.choices)
        elif isinstance(dist.low, int):  # every whole number, on a log scale too
            size *= dist.high - dist.low + 1
        else:
            return None
    return size


def _key(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A configuration as a comparable value (names sorted)."""
    return tuple(sorted(params.items()))


def _fits(distribution: Any, value: Any) -> bool:
    """Whether ``value`` is one of a Categorical's choices or inside a numeric range."""
    choices = getattr(distribution, "choices", None)
    if choices is not None:
        return any(type(value) is type(c) and value == c for c in choices)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(distribution.low, int) and not float(value).is_integer():
        return False  # an Integer range's prior must be a whole number
    return bool(distribution.low <= value <= distribution.high)
