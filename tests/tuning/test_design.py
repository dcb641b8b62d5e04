"""The Bayesian strategy's start design: a maximin Latin hypercube, one point per slice of
every range, made from the job's seed alone; skipped with warm-start priors and where a point
repeats a trial."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.tuning.test_search import RANGES, _config, _run
from trainops.tuning import Search
from trainops.tuning._design import design_point, latin_hypercube
from trainops.tuning._engine import trial_seed
from trainops.tuning._strategies import gp_available

pytestmark = pytest.mark.usefixtures("optuna")


def _slices(column: Any, size: int) -> list[int]:
    return sorted(int(u * size) for u in column)


def test_a_latin_hypercube_has_one_point_in_each_slice_of_each_dimension() -> None:
    points = latin_hypercube(10, 6, seed=3)
    assert points.shape == (10, 6)
    assert ((points >= 0) & (points < 1)).all()
    for dim in range(6):
        assert _slices(points[:, dim], 10) == list(range(10))


def test_the_design_is_the_seeds_alone() -> None:
    assert (latin_hypercube(10, 3, seed=1) == latin_hypercube(10, 3, seed=1)).all()
    assert not (latin_hypercube(10, 3, seed=1) == latin_hypercube(10, 3, seed=2)).all()


def _design(ranges: dict[str, Any], seed: int = 7) -> list[dict[str, Any]]:
    search = Search(_config("Bayesian", hyperparameter_ranges=ranges, random_seed=seed))
    return [p.hyperparameters for p in _run(search, 10, leave_running=False)]


def test_bayesian_starts_with_the_design_spread_over_every_range_on_its_scale() -> None:
    points = _design(RANGES)
    # lr is log-scaled over 3 decades: one point in each tenth of its log span
    lr = [(math.log10(float(p["lr"])) + 4) / 3 for p in points]
    assert _slices(lr, 10) == list(range(10))
    # momentum is reverse-log-scaled: one point per tenth of log(1 - momentum)'s span
    low, high = math.log(1 - 0.999), math.log(1 - 0.5)
    momentum = [(math.log(1 - float(p["momentum"])) - low) / (high - low) for p in points]
    assert _slices(momentum, 10) == list(range(10))
    assert all(type(p["batch_size"]) is int and 16 <= p["batch_size"] <= 128 for p in points)
    assert sorted(p["optimizer"] for p in points) == ["adam"] * 5 + ["sgd"] * 5


def test_the_design_is_not_random_sampling() -> None:
    # a Random search's first 10 draws of the same seed leave slices of lr empty
    search = Search(_config("Random", random_seed=7))
    drawn = [p.hyperparameters for p in _run(search, 10, leave_running=False)]
    lr = [(math.log10(float(p["lr"])) + 4) / 3 for p in drawn]
    assert _slices(lr, 10) != list(range(10))


def test_a_design_point_that_repeats_a_trial_is_left_to_the_sampler() -> None:
    tiny = {"lr": ["0.001", "0.01"], "n": {"type": "Integer", "min_value": 1, "max_value": 2}}
    engine = Search(_config("Bayesian", hyperparameter_ranges=tiny, random_seed=3))._engine
    design = [design_point(engine.distributions, 10, engine.seed, n) for n in range(4)]
    assert len({tuple(sorted(p.items())) for p in design}) == 2  # 10 points on 4 repeat
    points = _design(tiny, seed=3)
    assert len({tuple(sorted(p.items())) for p in points[:4]}) == 4  # the whole space first


def test_warm_start_priors_replace_the_design() -> None:
    parents = Search(_config("Random", tuning_job_name="parent"))
    _run(parents, 12, leave_running=False)
    config = _config("Bayesian", warm_start_config={"parents": ["parent"],
                                                    "warm_start_type": "TransferLearning"})  # fmt: skip
    engine = Search(config, parents=parents.records)._engine
    assert engine._design(0) is None
    assert Search(config)._engine._design(0) is not None


def test_design_points_are_values_of_their_distributions() -> None:
    import optuna

    dists = {
        "c": optuna.distributions.CategoricalDistribution(["x", "y", "z"]),
        "i": optuna.distributions.IntDistribution(1, 1000, log=True),
        "f": optuna.distributions.FloatDistribution(-1.0, 1.0),
    }
    seed = trial_seed(5, 0)
    for number in range(10):
        point = design_point(dists, 10, seed, number)
        assert all(
            dists[name]._contains(dists[name].to_internal_repr(v)) for name, v in point.items()
        )
    with pytest.raises(IndexError):
        design_point(dists, 10, seed, 10)


def test_the_gp_keeps_random_startup_trials_and_tpe_without_torch_takes_the_design() -> None:
    square = {"x": RANGES["lr"], "y": RANGES["momentum"]}  # every range Continuous: the GP
    search = Search(_config("Bayesian", hyperparameter_ranges=square))
    if gp_available():
        assert search._strategy.design_size() == 0
        assert search._engine._design(0) is None
    search._strategy.uses_gp = False  # as without torch: TPE
    assert search._strategy.design_size() == 10
    assert search._engine._design(0) is not None
    assert Search(_config("Random"))._strategy.design_size() == 0
