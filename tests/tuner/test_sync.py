"""A kept search caught up with the trial rows proposes what a search rebuilt from the same rows
proposes, and refuses (so the tuner rebuilds) rows that are not a continuation of what it knows."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest

from tests.tuning.conftest import make_config, optuna  # noqa: F401  (the fixture)
from trainops.tuner._sync import catch_up
from trainops.tuning import Search, TrialRecord, TrialStatus, TuningJobConfig

pytestmark = pytest.mark.usefixtures("optuna")


def _config(strategy: str) -> TuningJobConfig:
    early = "Auto" if strategy == "Bayesian" else "Off"
    return make_config(strategy=strategy, training_job_early_stopping_type=early)


def _loss(record: TrialRecord, epoch: int) -> float:
    return abs(math.log10(float(record.hyperparameters["lr"])) + 2.5) + 1.0 / epoch


def _rows(config: TuningJobConfig, count: int) -> list[TrialRecord]:
    """The rows of ``count`` trials as a tuner records them: asked, then with a curve growing
    and an outcome (every fourth trial still running, every fifth stopped)."""
    search = Search(config)
    rows = []
    for _ in range(count):
        proposal = search.ask()
        assert proposal is not None
        record = proposal.record()
        curve = {epoch: _loss(record, epoch) for epoch in range(1, 4)}
        if proposal.number % 4 == 3:
            rows.append(
                dataclasses.replace(record, intermediate_values=dict(list(curve.items())[:1]))
            )
            continue
        status = TrialStatus.STOPPED if proposal.number % 5 == 4 else TrialStatus.COMPLETED
        rows.append(dataclasses.replace(record, status=status, objective=curve[3],
                                        intermediate_values=curve))  # fmt: skip
        for step, value in rows[-1].intermediate_values.items():
            search.should_stop(proposal.number, step, value)
        search.tell(proposal.number, status, curve[3])
    return rows


@pytest.mark.parametrize("strategy", ["Random", "Bayesian", "Hyperband"])
def test_a_search_caught_up_step_by_step_proposes_what_a_rebuilt_one_does(strategy: str) -> None:
    config = _config(strategy)
    rows = _rows(config, 14)
    kept = Search(config, [])
    for count in range(1, len(rows) + 1):
        # what the tuner sees: each new trial first as asked, then with its curve and outcome
        kept.ask()
        assert catch_up(kept, [*rows[: count - 1], _asked(rows[count - 1])])
        assert catch_up(kept, rows[:count])
    rebuilt = Search(config, rows)
    assert kept.records == rebuilt.records
    for _ in range(3):
        ours, theirs = kept.ask(), rebuilt.ask()
        assert ours == theirs and ours is not None


def _asked(row: TrialRecord) -> TrialRecord:
    return TrialRecord(number=row.number, hyperparameters=row.hyperparameters)


def _changed_hyperparameters(rows: list[TrialRecord]) -> list[TrialRecord]:
    first = rows[0]
    return [dataclasses.replace(first, hyperparameters={**first.hyperparameters, "lr": 0.05}),
            *rows[1:]]  # fmt: skip


def _retried(rows: list[TrialRecord]) -> list[TrialRecord]:
    """The last (running) trial's retry: its curve cleared for a new try."""
    return [*rows[:-1], dataclasses.replace(rows[-1], intermediate_values={})]


def _other_outcome(rows: list[TrialRecord]) -> list[TrialRecord]:
    return [dataclasses.replace(rows[0], objective=123.0), *rows[1:]]


@pytest.mark.parametrize(
    "change",
    [
        lambda rows: rows[:-1],  # a trial the rows lack (asked, never recorded)
        lambda rows: [*rows, _asked(rows[-1])],  # a row the search never proposed
        _changed_hyperparameters,
        _retried,
        _other_outcome,
    ],
    ids=["missing", "extra", "hyperparameters", "retried", "outcome"],
)
def test_rows_that_do_not_continue_the_search_are_refused_and_nothing_is_told(
    change: Callable[[list[TrialRecord]], list[TrialRecord]],
) -> None:
    config = _config("Random")
    rows = _rows(config, 4)  # the last one is still running, one step into its curve
    kept = Search(config, rows)
    before = kept.records
    assert not catch_up(kept, change(rows))
    assert kept.records == before


def test_a_diverged_trial_s_nan_is_the_same_value_each_pass() -> None:
    config = _config("Random")
    kept = Search(config)
    proposal = kept.ask()
    assert proposal is not None
    row = dataclasses.replace(proposal.record(), intermediate_values={1: math.nan})
    assert catch_up(kept, [row])
    assert catch_up(kept, [row])


@pytest.mark.parametrize(
    ("strategy", "early_stopping", "stops"),
    [("Random", "Off", False), ("Random", "Auto", True), ("Hyperband", "Off", True)],
)
def test_a_search_says_whether_a_rule_may_stop_its_trials(
    strategy: str, early_stopping: str, stops: bool
) -> None:
    config = make_config(strategy=strategy, training_job_early_stopping_type=early_stopping)
    assert Search(config).stops_early is stops
