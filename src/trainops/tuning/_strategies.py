"""The search strategies, registered in one table: a strategy's name -> its factory.

A strategy says how the next trial's hyperparameters are sampled (an Optuna sampler, made anew
for each trial from a seed derived from the job's seed and the trial's number, so a rebuilt
search proposes what the uninterrupted one would) and which rule stops trials early. Grid
enumerates its combinations in order instead of sampling.

Bayesian is Optuna's Gaussian-process sampler where every range is Continuous and torch and
scipy are installed (they are optional); otherwise, and for Hyperband (whose stopped trials only
TPE learns from), it is Optuna's TPE; Bayesian's TPE on a finite space also takes local steps
from the best trial (trainops.tuning._local), and its GP refinement steps near it
(trainops.tuning._refine). bench/tuning_quality.py measures both.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainops._registry import Registry
from trainops.tuning._config import Strategy, TuningJobConfig
from trainops.tuning._limits import EarlyStoppingType, ObjectiveType
from trainops.tuning._records import TunedValue
from trainops.tuning._refine import is_refine_turn, refining_gp_sampler
from trainops.tuning._rules import HyperbandRule, MedianRule, StoppingRule
from trainops.tuning._space import ParameterType, grid_size, grid_values

if TYPE_CHECKING:
    import optuna

__all__ = [
    "STRATEGIES",
    "BayesianStrategy",
    "GridStrategy",
    "HyperbandStrategy",
    "RandomStrategy",
    "SearchStrategy",
    "StrategyFactory",
    "gp_available",
    "register_strategy",
    "strategy_for",
    "strategy_names",
    "tpe_sampler",
]

BAYESIAN_STARTUP_TRIALS = 10  # random trials before the model (Optuna's default for both)
_GP_MODULES = ("torch", "scipy")  # what Optuna's GPSampler imports (the `torch` extra brings both)


def gp_available() -> bool:
    """Whether Optuna's GP sampler can run here: torch and scipy import (once per process, on
    a Bayesian job's first proposal; a missing or broken install means TPE, on every restart)."""
    return _gp_imports()


@functools.cache
def _gp_imports() -> bool:
    if any(importlib.util.find_spec(module) is None for module in _GP_MODULES):
        return False
    try:
        for module in _GP_MODULES:
            importlib.import_module(module)
    except Exception:  # a broken install (a missing shared library, an ABI mismatch) is no GP
        return False
    return True


class SearchStrategy(ABC):
    """How one tuning job chooses its trials."""

    def __init__(self, config: TuningJobConfig, study_name: str) -> None:
        self.config = config
        self.study_name = study_name

    @abstractmethod
    def sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        """The Optuna sampler that proposes the trial seeded with ``seed``."""

    def trial_sampler(self, seed: int, number: int) -> optuna.samplers.BaseSampler:
        """The sampler that proposes trial ``number`` (seeded with ``seed``): :meth:`sampler`'s,
        unless the strategy treats some trials differently (Bayesian's refinement steps)."""
        return self.sampler(seed)

    def fixed(self, number: int) -> dict[str, TunedValue] | None:
        """The hyperparameters of trial ``number`` if the strategy fixes them (Grid)."""
        return None

    def capacity(self) -> int | None:
        """How many distinct trials the strategy can propose (``None``: unbounded)."""
        return None

    def local_steps(self) -> bool:
        """Whether some trials on a finite space are local steps from the best trial
        (trainops.tuning._local) instead of the sampler's proposals."""
        return False

    def stopping_rule(self) -> StoppingRule | None:
        """The rule that stops trials early: the median rule with early stopping ``Auto``."""
        if self.config.training_job_early_stopping_type is EarlyStoppingType.AUTO:
            return MedianRule(self.config.objective.type is ObjectiveType.MAXIMIZE)
        return None


class RandomStrategy(SearchStrategy):
    """Independent uniform draws (on each range's scale)."""

    def sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        import optuna

        return optuna.samplers.RandomSampler(seed=seed)


class BayesianStrategy(SearchStrategy):
    """Optuna's GP sampler (log expected improvement; trials still running are kept apart by
    its q-batch acquisition; from trial 30, every other trial a refinement step near the best
    trial, trainops.tuning._refine) where every range is Continuous and :func:`gp_available`, else
    :func:`tpe_sampler`'s TPE, which on a finite space takes every trial past the 25th as a
    local step from the best trial while it has a neighbour left to try
    (trainops.tuning._local)."""

    def __init__(self, config: TuningJobConfig, study_name: str) -> None:
        super().__init__(config, study_name)
        self.uses_gp: bool | None = None  # decided on the first proposal (imports torch)

    def gp_pays(self) -> bool:
        """Whether every range is Continuous: there the GP finds far better points than TPE;
        on Integer and Categorical ranges TPE did as well or better (bench/tuning_quality.py)."""
        ranges = self.config.hyperparameter_ranges.values()
        return all(rng.type is ParameterType.CONTINUOUS for rng in ranges)

    def _gp(self) -> bool:
        if self.uses_gp is None:
            self.uses_gp = self.gp_pays() and gp_available()
        return self.uses_gp

    def local_steps(self) -> bool:
        """TPE's, on a finite space (every range Integer or Categorical)."""
        return not self._gp()

    def sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        if not self._gp():
            return tpe_sampler(seed)
        import optuna

        return optuna.samplers.GPSampler(**_gp_options(seed))

    def trial_sampler(self, seed: int, number: int) -> optuna.samplers.BaseSampler:
        """The GP's refinement step on its turns (trainops.tuning._refine), else
        :meth:`sampler`'s."""
        if self._gp() and is_refine_turn(number):
            sampler: optuna.samplers.BaseSampler = refining_gp_sampler(**_gp_options(seed))
            return sampler
        return self.sampler(seed)


def _gp_options(seed: int) -> dict[str, Any]:
    return {
        "seed": seed,
        "n_startup_trials": BAYESIAN_STARTUP_TRIALS,
        "warn_independent_sampling": False,
    }


def tpe_sampler(seed: int) -> optuna.samplers.BaseSampler:
    """Optuna's multivariate TPE; trials still running count as lies (constant liar)."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed,
            multivariate=True,
            group=True,
            constant_liar=True,
            n_startup_trials=BAYESIAN_STARTUP_TRIALS,
        )


class HyperbandStrategy(SearchStrategy):
    """TPE proposals (it learns from stopped trials' curves; the GP only from completed ones),
    stopped by Hyperband's brackets of successive halving."""

    def sampler(self, seed: int) -> optuna.samplers.BaseSampler:
        return tpe_sampler(seed)

    def stopping_rule(self) -> StoppingRule | None:
        resource = self.config.hyperband_resource()
        assert resource is not None
        return HyperbandRule(
            self.config.objective.type is ObjectiveType.MAXIMIZE,
            self.study_name,
            resource.min_resource,
            resource.max_resource,
            resource.reduction_factor,
        )


class GridStrategy(RandomStrategy):
    """Every combination of the Categorical ranges once, in order."""

    def fixed(self, number: int) -> dict[str, TunedValue] | None:
        return grid_values(self.config.hyperparameter_ranges, number)

    def capacity(self) -> int | None:
        return grid_size(self.config.hyperparameter_ranges)


StrategyFactory = Callable[[TuningJobConfig, str], SearchStrategy]

#: strategy name (as in ``strategy:``) -> factory, in registration order.
STRATEGIES: Registry[StrategyFactory] = Registry("strategy", error=ValueError)
STRATEGIES.register(Strategy.BAYESIAN.value, BayesianStrategy)
STRATEGIES.register(Strategy.RANDOM.value, RandomStrategy)
STRATEGIES.register(Strategy.GRID.value, GridStrategy)
STRATEGIES.register(Strategy.HYPERBAND.value, HyperbandStrategy)


def register_strategy(name: str, factory: StrategyFactory, *, replace: bool = False) -> None:
    """Add the strategy called ``name`` (``replace``: in place of the one registered)."""
    STRATEGIES.register(name, factory, replace=replace)


def strategy_names() -> list[str]:
    """The registered strategies' names, in registration order."""
    return list(STRATEGIES.names())


def strategy_for(config: TuningJobConfig, study_name: str) -> SearchStrategy:
    """The strategy ``config`` names, made for the tuning job ``study_name``."""
    return STRATEGIES.lookup(config.strategy.value)(config, study_name)
