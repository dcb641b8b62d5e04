"""Refinement steps: from trial 30, every other trial of a Bayesian GP search (every range
Continuous) is the local posterior mean's optimum climbed to from the best trial; not for TPE,
Random or before the turn; in bounds on log and reverse-log scales; rebuilt alike; with trials
running too, never repeating one."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.tuning.test_bayesian import CONTINUOUS, SQUARE
from tests.tuning.test_search import _config
from trainops.tuning import Search, TrialRecord, TrialStatus, _refine
from trainops.tuning._refine import REFINE_EVERY, REFINE_FROM, is_refine_turn
from trainops.tuning._strategies import strategy_for

pytestmark = pytest.mark.usefixtures("optuna")

LIMITS = {"max_number_of_training_jobs": 60, "max_parallel_training_jobs": 1}
OPTIMUM = (0.3, 0.6)


def test_every_other_trial_from_the_30th_is_a_refinement_turn() -> None:
    turns = [n for n in range(40) if is_refine_turn(n)]
    assert turns == [30, 32, 34, 36, 38] and (REFINE_FROM, REFINE_EVERY) == (30, 2)


def _sampler_name(number: int, strategy: str = "Bayesian", ranges: Any = SQUARE) -> str:
    config = _config(strategy, hyperparameter_ranges=ranges)
    return type(strategy_for(config, "job").trial_sampler(1, number)).__name__


def test_only_the_gp_refines_and_only_on_its_turns() -> None:
    require_extra("torch")
    assert _sampler_name(29) == "GPSampler"
    assert _sampler_name(30) == "_RefiningGPSampler"
    assert _sampler_name(31) == "GPSampler"
    assert _sampler_name(30, "Random") == "RandomSampler"
    assert _sampler_name(30, "Hyperband") == "TPESampler"
    integer = dict(SQUARE, n={"type": "Integer", "min_value": 1, "max_value": 9})
    assert _sampler_name(30, ranges=integer) == "TPESampler"  # (local steps instead)


def _bowl(values: Any) -> float:
    return (float(values["x"]) - OPTIMUM[0]) ** 2 + (float(values["y"]) - OPTIMUM[1]) ** 2


def _records(count: int) -> list[TrialRecord]:
    """``count`` completed trials of the bowl: random points, none nearer its optimum than 0.1,
    and none with x above 0.7 (a region the model knows nothing of)."""
    rng, records = random.Random(3), []
    while len(records) < count:
        point = {"x": rng.uniform(0.0, 0.7), "y": rng.uniform(0.0, 1.0)}
        if math.dist((point["x"], point["y"]), OPTIMUM) > 0.1:
            status, value = TrialStatus.COMPLETED, _bowl(point)
            records.append(TrialRecord(len(records), point, status, value))
    return records


def _ask(records: list[TrialRecord], ranges: Any = SQUARE) -> dict[str, Any]:
    config = _config("Bayesian", hyperparameter_ranges=ranges, resource_limits=LIMITS)
    proposal = Search(config, records).ask()
    assert proposal is not None
    return dict(proposal.hyperparameters)


@pytest.mark.slow
def test_a_refinement_step_goes_to_the_models_optimum_near_the_best_trial(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_extra("torch")
    records = _records(14)
    best = min(_bowl(r.hyperparameters) for r in records)
    monkeypatch.setattr(_refine, "REFINE_FROM", 14)
    step = _ask(records)
    # the bowl's optimum, predicted from points no nearer than 0.1: far better than the best
    assert _bowl(step) < best / 10, (step, best)
    assert step == _ask(records)  # a function of the records and the seed alone
    monkeypatch.setattr(_refine, "REFINE_FROM", 15)  # expected improvement's turn instead
    assert _bowl(_ask(records)) > _bowl(step)


@pytest.mark.slow
def test_a_refinement_step_is_in_bounds_and_rebuilt_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_extra("torch")
    monkeypatch.setattr(_refine, "REFINE_FROM", 11)
    monkeypatch.setattr(_refine, "REFINE_EVERY", 1)
    config = _config("Bayesian", hyperparameter_ranges=CONTINUOUS, resource_limits=LIMITS)
    search = Search(config)
    for _ in range(13):
        proposal = search.ask()
        assert proposal is not None
        lr, momentum = (float(proposal.hyperparameters[k]) for k in ("lr", "momentum"))
        assert 1e-4 <= lr <= 0.1 and 0.5 <= momentum <= 0.999, proposal
        value = (math.log10(lr) + 2.5) ** 2 + (math.log10(1 - momentum) + 1.5) ** 2
        search.tell(proposal.number, TrialStatus.COMPLETED, value)
    rebuilt = Search(config, search.records[:12])
    again = rebuilt.ask()
    assert again is not None and again.hyperparameters == search.records[12].hyperparameters


def _running(number: int, point: dict[str, Any]) -> TrialRecord:
    return TrialRecord(number, point, TrialStatus.IN_PROGRESS)


@pytest.mark.slow
def test_with_trials_running_a_refinement_step_still_climbs_and_never_repeats_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_extra("torch")
    records = _records(14)
    monkeypatch.setattr(_refine, "REFINE_FROM", 14)
    step = _ask(records)
    monkeypatch.setattr(_refine, "REFINE_FROM", 15)
    # a trial running elsewhere (the GP's batch acquisition): the step is the same climb
    assert _ask([*records, _running(14, {"x": 0.9, "y": 0.1})]) == step
    # a refinement step still running where the climb ends: the acquisition proposes instead,
    # as on a turn that is not a refinement step's
    there = [*records, _running(14, step)]
    instead = _ask(there)
    monkeypatch.setattr(_refine, "REFINE_FROM", 16)
    assert instead != step and instead == _ask(there)
