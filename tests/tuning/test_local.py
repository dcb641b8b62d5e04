"""Local steps: past trial 25, every Bayesian (TPE) trial on a finite space is the best trial
with one range moved (an Integer by one, a Categorical to another value), never a trial already
tried, while the best has such a neighbour left (else TPE proposes); not on Continuous ranges,
not for the GP or Random; rebuilt alike."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tuning.test_search import RANGES, _config, _run
from trainops.tuning import Proposal, Search
from trainops.tuning._local import LOCAL_FROM, is_local_turn, neighbours

pytestmark = pytest.mark.usefixtures("optuna")

#: 7 x 4 x 3 = 84 configurations, the curve's best at lr 0.003 with adam
FINITE = {
    "lr": ["0.0001", "0.0003", "0.001", "0.003", "0.01", "0.03", "0.1"],
    "optimizer": ["sgd", "adam", "rmsprop", "adagrad"],
    "layers": {"type": "Integer", "min_value": 1, "max_value": 3},
}
LIMITS = {"max_number_of_training_jobs": 60, "max_parallel_training_jobs": 1}


def _search(strategy: str = "Bayesian", ranges: dict[str, Any] = FINITE) -> Search:
    return Search(_config(strategy, hyperparameter_ranges=ranges, resource_limits=LIMITS))


def _moves(one: dict[str, Any], other: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (one[k], other[k]) for k in one if one[k] != other[k]}


def _best_before(search: Search, number: int) -> dict[str, Any]:
    done = [r for r in search.records[:number] if r.objective is not None]
    return dict(min(done, key=lambda r: (r.objective, r.number)).hyperparameters)


def test_every_trial_past_the_25th_is_a_local_turn() -> None:
    turns = [n for n in range(45) if is_local_turn(n)]
    assert turns == list(range(25, 45)) and LOCAL_FROM == 25


def test_neighbours_move_one_range_by_one_step() -> None:
    import optuna

    dists = {
        "o": optuna.distributions.CategoricalDistribution(["a", "b", "c"]),
        "n": optuna.distributions.IntDistribution(1, 5),
    }
    assert neighbours(dists, {"o": "a", "n": 1}) == [
        {"o": "b", "n": 1},
        {"o": "c", "n": 1},
        {"o": "a", "n": 2},
    ]
    assert {p["n"] for p in neighbours(dists, {"o": "a", "n": 3})} == {2, 3, 4}


def _key(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(values.items()))


def test_a_local_turn_is_a_fresh_neighbour_of_the_best_trial() -> None:
    search = _search()
    proposals = _run(search, 45, leave_running=False)
    keys = [_key(p.hyperparameters) for p in proposals]
    assert len(set(keys)) == len(keys)  # never a trial already tried
    steps = stuck = 0
    for proposal in proposals:
        if not is_local_turn(proposal.number):
            continue
        best = _best_before(search, proposal.number)
        tried = set(keys[: proposal.number])
        fresh = [p for p in neighbours(search._engine.distributions, best) if _key(p) not in tried]
        if not fresh:  # every neighbour tried (a local optimum): the sampler proposes
            assert _key(proposal.hyperparameters) not in tried
            stuck += 1
            continue
        assert proposal.hyperparameters in fresh, proposal.number
        steps += 1
    assert steps >= 5 and stuck >= 5 and steps + stuck == 45 - LOCAL_FROM


def test_only_bayesian_tpe_on_a_finite_space_takes_local_steps() -> None:
    finite = _search()
    assert finite._strategy.local_steps() and finite._engine.size == 84
    assert _search(ranges=RANGES)._engine._local(32) is None  # a Continuous range: unbounded
    assert not _search("Random")._strategy.local_steps()
    gp = _search()
    gp._strategy.uses_gp = True
    assert not gp._strategy.local_steps()


def _local_turns(proposals: list[Proposal], search: Search) -> int:
    return sum(
        len(_moves(_best_before(search, p.number), p.hyperparameters)) == 1
        for p in proposals
        if p.number > LOCAL_FROM
    )


def test_random_search_moves_more_than_one_range_from_the_best() -> None:
    # the check above can fail: a Random search's trials past 30 are rarely one move away
    search = _search("Random")
    proposals = _run(search, 45, leave_running=False)
    assert _local_turns(proposals, search) < 5


def test_a_rebuilt_search_takes_the_same_local_steps() -> None:
    first = _search()
    _run(first, 33)  # every third left running
    rebuilt = Search(first.config, first.records)
    assert _run(first, 9) == _run(rebuilt, 9)


def test_a_warm_start_prior_without_every_range_is_no_incumbent() -> None:
    parent = Search(
        _config("Random", tuning_job_name="parent", resource_limits=LIMITS,
                hyperparameter_ranges={k: FINITE[k] for k in ("lr", "optimizer")})
    )  # fmt: skip
    _run(parent, 12, leave_running=False)  # the parents' best lacks "layers"
    config = _config("Bayesian", hyperparameter_ranges=FINITE, resource_limits=LIMITS,
                     warm_start_config={"parents": ["parent"],
                                        "warm_start_type": "TransferLearning"})  # fmt: skip
    search = Search(config, parents=parent.records)
    assert search.priors == 12
    assert search._engine._local(32) is None  # no trial of this job has completed yet
    proposals = _run(search, 36, leave_running=False)
    assert all(set(p.hyperparameters) == set(FINITE) for p in proposals)
