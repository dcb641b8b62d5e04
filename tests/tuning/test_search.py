"""The search: proposals inside the ranges, the job limit, Grid, ask-and-tell errors, warm start,
and a search rebuilt from its records proposing what the uninterrupted one would."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.tuning.conftest import make_config
from trainops.tuning import Proposal, Search, TrialRecord, TrialStatus, TuningJobConfig
from trainops.tuning._limits import Strategy
from trainops.tuning._strategies import STRATEGIES

pytestmark = pytest.mark.usefixtures("optuna")

RANGES = {
    "lr": {"type": "Continuous", "min_value": 1e-4, "max_value": 0.1, "scaling_type": "Logarithmic"},
    "momentum": {"type": "Continuous", "min_value": 0.5, "max_value": 0.999,
                 "scaling_type": "ReverseLogarithmic"},
    "batch_size": {"type": "Integer", "min_value": 16, "max_value": 128},
    "optimizer": ["sgd", "adam"],
}  # fmt: skip


def _curve(proposal: Proposal, epoch: int) -> float:
    """A learning curve whose end is best near lr=3e-3 with adam."""
    hp = proposal.hyperparameters
    gap = abs(math.log10(float(hp["lr"])) + 2.5) + (0.2 if hp.get("optimizer") == "sgd" else 0.0)
    return gap + 1.0 / epoch


def _run(search: Search, count: int, leave_running: bool = True) -> list[Proposal]:
    """Ask ``count`` trials; every third is left running, the others run their curve."""
    proposals = []
    for _ in range(count):
        proposal = search.ask()
        assert proposal is not None
        proposals.append(proposal)
        if leave_running and proposal.number % 3 == 2:
            continue
        for epoch in range(1, 10):
            if search.should_stop(proposal.number, epoch, _curve(proposal, epoch)):
                search.tell(proposal.number, TrialStatus.STOPPED)
                break
        else:
            search.tell(proposal.number, TrialStatus.COMPLETED, _curve(proposal, 9))
    return proposals


def _config(strategy: str, **changes: Any) -> TuningJobConfig:
    changes.setdefault("hyperparameter_ranges", RANGES)
    return make_config(strategy=strategy, **changes)


#: 3 x 2 x 3 = 18 configurations: searches of 19 trials draw again past repeats, then exhaust them
DISCRETE = {
    "lr": ["0.001", "0.003", "0.01"],
    "optimizer": ["sgd", "adam"],
    "layers": {"type": "Integer", "min_value": 1, "max_value": 3},
}

#: The strategies' conformance cases: every registered strategy needs at least one (checked).
REBUILD_CASES: list[tuple[str, dict[str, Any]]] = [
    ("Random", {}),
    ("Bayesian", {}),  # TPE: not every range is Continuous
    ("Bayesian", {"hyperparameter_ranges": {k: RANGES[k] for k in ("lr", "momentum")}}),  # GP
    ("Bayesian", {"training_job_early_stopping_type": "Auto"}),
    ("Hyperband", {}),
    ("Random", {"hyperparameter_ranges": DISCRETE}),
    ("Bayesian", {"hyperparameter_ranges": DISCRETE}),
    ("Grid", {"hyperparameter_ranges": {"o": ["a", "b", "c"], "b": [1, 2, 3, 4]},
              "resource_limits": {"max_parallel_training_jobs": 2}}),
]  # fmt: skip


def test_every_registered_strategy_is_a_config_name_with_a_rebuild_case() -> None:
    registered = set(STRATEGIES.names())
    assert registered == {strategy.value for strategy in Strategy}  # the config's names
    assert registered <= {name for name, _ in REBUILD_CASES}, "a strategy has no rebuild case"


def test_an_unknown_strategy_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown strategy 'Annealing' \(known: Bayesian, "):
        STRATEGIES.lookup("Annealing")


@pytest.mark.parametrize(("strategy", "changes"), REBUILD_CASES)
def test_a_rebuilt_search_proposes_what_the_uninterrupted_one_would(
    strategy: str, changes: dict[str, Any]
) -> None:
    config = _config(strategy, **changes)
    curve_free = strategy == "Grid"
    first = Search(config)
    if curve_free:
        proposals = [first.ask() for _ in range(5)]
        assert all(p is not None for p in proposals)
    else:
        _run(first, 14)  # past Bayesian's 10 random startup trials
    rebuilt = Search(config, first.records)
    assert rebuilt.records == first.records
    if curve_free:
        ahead = [first.ask() for _ in range(4)]
        assert ahead == [rebuilt.ask() for _ in range(4)]
    else:
        assert _run(first, 5) == _run(rebuilt, 5)
        assert rebuilt.records == first.records  # the same stop decisions too


def test_another_seed_proposes_otherwise() -> None:
    one = Search(_config("Random")).ask()
    other = Search(_config("Random", random_seed=8)).ask()
    assert one is not None and other is not None
    assert one.hyperparameters != other.hyperparameters


def test_proposals_lie_in_their_ranges_with_their_types() -> None:
    search = Search(_config("Random", resource_limits={"max_number_of_training_jobs": 200,
                                                       "max_parallel_training_jobs": 1}))  # fmt: skip
    values = [p.hyperparameters for p in _run(search, 200, leave_running=False)]
    for hp in values:
        assert isinstance(hp["lr"], float) and 1e-4 <= hp["lr"] <= 0.1
        assert isinstance(hp["momentum"], float) and 0.5 <= hp["momentum"] <= 0.999
        assert type(hp["batch_size"]) is int and 16 <= hp["batch_size"] <= 128
        assert hp["optimizer"] in ("sgd", "adam")
    # log scale: about half the draws below the geometric middle (1e-4 .. 0.1 -> ~3.2e-3)
    below = sum(hp["lr"] < math.sqrt(1e-4 * 0.1) for hp in values)
    assert 60 < below < 140
    # reverse log: most of the draws crowd towards 1 (half of them above 0.9776)
    near_one = sum(hp["momentum"] > 1 - math.sqrt(0.5 * 0.001) for hp in values)
    assert 60 < near_one < 140


@pytest.mark.parametrize("strategy", ["Random", "Bayesian", "Hyperband"])
def test_a_configuration_is_proposed_again_only_when_every_one_has_been(strategy: str) -> None:
    search = Search(_config(strategy, hyperparameter_ranges=DISCRETE))
    proposals = _run(search, 20, leave_running=False)
    seen = [tuple(sorted(p.hyperparameters.items())) for p in proposals]
    # the sampler's draws that repeat a trial are drawn again, by the sampler and then at
    # random: with two thirds of the space left, some draw finds a new configuration
    assert len(set(seen[:12])) == 12
    assert len(set(seen)) >= 16  # nearly all of them before any repeat is taken
    assert len(proposals) == 20  # and when the space is spent, a repeat rather than none


def test_a_spent_space_is_not_drawn_again_and_a_continuous_one_is_never_spent() -> None:
    engine = Search(_config("Random", hyperparameter_ranges=DISCRETE))._engine
    assert engine.size == 18
    for number in range(18):
        engine.ask(number)
    asked = len(engine.study.trials)  # the redraws' discarded trials included
    engine.ask(18)
    assert len(engine.study.trials) == asked + 1  # a single draw once every one is taken
    assert Search(_config("Random"))._engine.size is None


def test_the_job_limit_ends_asking_and_grid_runs_each_combination_once() -> None:
    search = Search(_config("Random", resource_limits={"max_number_of_training_jobs": 3,
                                                       "max_parallel_training_jobs": 1}))  # fmt: skip
    assert [search.ask() is not None for _ in range(4)] == [True, True, True, False]
    grid = Search(_config("Grid", hyperparameter_ranges={"o": ["a", "b"], "b": [1, 2, 3]},
                          resource_limits={"max_parallel_training_jobs": 1}))  # fmt: skip
    seen = []
    while (proposal := grid.ask()) is not None:
        seen.append(tuple(sorted(proposal.hyperparameters.items())))
    assert len(seen) == len(set(seen)) == 6


def test_a_trial_retried_keeps_its_number_and_is_not_counted_again() -> None:
    config = _config("Random", resource_limits={"max_number_of_training_jobs": 2,
                                                "max_parallel_training_jobs": 1})  # fmt: skip
    first = Search(config)
    lost = first.ask()
    assert lost is not None
    # the tuner restarts: the lost trial is still InProgress in the store, and is run again
    again = Search(config, [lost.record()])
    following = again.ask()
    assert following is not None and following.number == 1
    assert again.ask() is None
    again.tell(0, TrialStatus.COMPLETED, 0.5)
    assert again.records[0].objective == 0.5


def test_ask_and_tell_refuse_what_makes_no_sense() -> None:
    search = Search(_config("Random"))
    with pytest.raises(ValueError, match="trial 0 was never proposed"):
        search.tell(0, TrialStatus.COMPLETED, 1.0)
    search.ask()
    with pytest.raises(ValueError, match="takes a finished status"):
        search.tell(0, TrialStatus.IN_PROGRESS)
    search.tell(0, TrialStatus.FAILED)
    with pytest.raises(ValueError, match="already ended"):
        search.tell(0, TrialStatus.COMPLETED, 1.0)
    with pytest.raises(ValueError, match="already ended"):
        search.should_stop(0, 1, 1.0)
    search.ask()
    with pytest.raises(ValueError, match="a step is a whole number from 0, not -1"):
        search.should_stop(1, -1, 1.0)
    with pytest.raises(ValueError, match=r"not 1\.5"):
        search.should_stop(1, 1.5, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="without gaps"):
        Search(_config("Random"), [TrialRecord(1, {"lr": 0.01})])
    with pytest.raises(ValueError, match="recorded twice"):
        record = TrialRecord(0, {"lr": 0.01, "momentum": 0.9, "batch_size": 16, "optimizer": "sgd"})
        Search(_config("Random"), [record, record])


def test_a_step_reported_again_keeps_its_first_value() -> None:
    search = Search(_config("Random"))
    search.ask()
    search.should_stop(0, 1, 0.5)
    search.should_stop(0, 1, 0.9)  # redelivered after a restart
    assert search.records[0].intermediate_values == {1: 0.5}


def test_stopped_trials_count_with_their_last_value_and_nan_stops() -> None:
    search = Search(_config("Random", training_job_early_stopping_type="Auto"))
    search.ask()
    assert search.should_stop(0, 1, math.nan)  # a NaN objective stops the trial
    search.tell(0, TrialStatus.STOPPED)
    search.ask()
    search.should_stop(1, 1, 0.7)
    search.should_stop(1, 2, 0.4)
    search.tell(1, TrialStatus.STOPPED)
    best = search.best()
    assert best is not None and best.number == 1 and best.counted_objective == 0.4


def test_training_hyperparameters_and_sagemaker_strings() -> None:
    config = _config(
        "Hyperband", strategy_config={"hyperband_strategy_config": {"max_resource": 5}}
    )
    search = Search(config)
    proposal = search.ask()
    assert proposal is not None
    full = search.training_hyperparameters(proposal)
    assert full["epochs"] == 5 and full["seed"] == 1  # Hyperband runs trials to max_resource
    assert full["lr"] == proposal.hyperparameters["lr"]
    strings = Search.sagemaker_strings(proposal.hyperparameters)
    assert float(strings["lr"]) == proposal.hyperparameters["lr"]
    assert strings["batch_size"] == str(proposal.hyperparameters["batch_size"])


def _parent_records(count: int) -> list[TrialRecord]:
    source = Search(_config("Random", tuning_job_name="parent"))
    _run(source, count, leave_running=False)
    return source.records


def test_warm_start_learns_from_the_parents_trials() -> None:
    parents = _parent_records(12)
    config = _config("Bayesian", warm_start_config={"parents": ["parent"],
                                                    "warm_start_type": "TransferLearning"})  # fmt: skip
    warm = Search(config, parents=parents)
    assert warm.priors == 12
    cold = Search(config)
    # past its startup trials thanks to the priors, the warm search models from the first trial
    assert warm.ask() != cold.ask()
    rebuilt = Search(config, warm.records, parents=parents)
    assert rebuilt.ask() == warm.ask()


def test_warm_start_leaves_out_what_does_not_fit_the_new_ranges() -> None:
    parents = _parent_records(6)
    narrow = dict(RANGES, lr={"type": "Continuous", "min_value": 1e-3, "max_value": 1e-2})
    inside = sum(1e-3 <= float(r.hyperparameters["lr"]) <= 1e-2 for r in parents)
    failed = TrialRecord(6, dict(parents[0].hyperparameters), TrialStatus.FAILED)
    config = _config("Bayesian", hyperparameter_ranges={"lr": narrow["lr"]})
    assert Search(config, parents=[*parents, failed]).priors == inside
    renamed = {"rate": RANGES["lr"]}
    assert Search(_config("Bayesian", hyperparameter_ranges=renamed), parents=parents).priors == 0


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"lr": 0.01}, "are not the tuned ones"),
        ({"lr": 5.0, "momentum": 0.9, "batch_size": 16, "optimizer": "sgd"}, "lr outside"),
        ({"lr": 0.01, "momentum": 0.9, "batch_size": 16.5, "optimizer": "sgd"}, "batch_size"),
        ({"lr": 0.01, "momentum": 0.9, "batch_size": 16, "optimizer": "rmsprop"}, "optimizer"),
        ({"lr": "x", "momentum": 0.9, "batch_size": 16, "optimizer": "sgd"}, "lr outside"),
        ({"lr": 0.01, "momentum": "x", "batch_size": 16, "optimizer": "sgd"}, "momentum outside"),
        ({"lr": 0.01, "momentum": 1.0, "batch_size": 16, "optimizer": "sgd"}, "momentum outside"),
    ],
)
def test_a_record_that_is_not_a_point_of_the_ranges_is_refused(
    values: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ValueError, match=f"trial 0: .*{reason}"):
        Search(_config("Random"), [TrialRecord(0, values)])
