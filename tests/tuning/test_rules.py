"""Early-stopping rules on synthetic curves: the median rule and Hyperband's brackets.

Hyperband is checked against Optuna's own HyperbandPruner on the same curves: the same bracket
for every trial and the same stop decisions below the max resource.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from trainops.tuning import HyperbandRule, MedianRule, TrialRecord, TrialStatus


def _done(
    number: int, curve: dict[int, float], status: TrialStatus = TrialStatus.COMPLETED
) -> TrialRecord:
    return TrialRecord(number, {}, status, curve[max(curve)], curve)


def _running(number: int, curve: dict[int, float]) -> TrialRecord:
    return TrialRecord(number, {}, TrialStatus.IN_PROGRESS, None, curve)


FINISHED = [
    _done(0, {1: 1.0, 2: 0.8, 3: 0.6}),  # running averages at 2: 0.9
    _done(1, {1: 2.0, 2: 1.0, 3: 0.9}),  # 1.5
    _done(2, {1: 0.5, 2: 0.3}, TrialStatus.STOPPED),  # 0.4
]


def test_the_median_rule_compares_with_the_median_of_running_averages() -> None:
    rule = MedianRule(maximize=False)
    median = statistics.median([0.9, 1.5, 0.4])  # 0.9
    assert not rule.should_stop(_running(3, {1: 9, 2: median}), 2, FINISHED)  # not worse
    assert rule.should_stop(_running(3, {1: 0, 2: median + 0.01}), 2, FINISHED)
    assert not MedianRule(maximize=True).should_stop(_running(3, {2: median + 0.01}), 2, FINISHED)
    assert MedianRule(maximize=True).should_stop(_running(3, {2: median - 0.01}), 2, FINISHED)


def test_the_median_rule_needs_three_finished_curves_that_reach_the_step() -> None:
    rule = MedianRule(maximize=False)
    assert not rule.should_stop(_running(3, {3: 100.0}), 3, FINISHED)  # trial 2 stopped at 2
    assert not rule.should_stop(_running(3, {1: 100.0}), 1, FINISHED[:2])
    running = [*FINISHED[:2], _running(2, {1: 0.1, 2: 0.1})]  # running trials do not count
    assert not rule.should_stop(_running(3, {2: 100.0}), 2, running)
    assert rule.should_stop(_running(3, {1: math.nan}), 1, [])  # a NaN objective stops


def _optuna_decisions(optuna: Any, curves: list[list[float]], rule: HyperbandRule) -> list[Any]:
    """Run ``curves`` one trial after another under Optuna's HyperbandPruner: each trial's
    (bracket, step it was pruned at or None)."""
    pruner = optuna.pruners.HyperbandPruner(
        min_resource=rule.min_resource, max_resource=rule.max_resource,
        reduction_factor=rule.eta,
    )  # fmt: skip
    study = optuna.create_study(study_name=rule.study_name, pruner=pruner)
    out = []
    for curve in curves:
        trial = study.ask()
        pruned_at = None
        for step, value in enumerate(curve, start=1):
            trial.report(value, step)
            if step < rule.max_resource and trial.should_prune():
                pruned_at = step
                break
        study.tell(trial, state=optuna.trial.TrialState.PRUNED if pruned_at else None,
                   values=None if pruned_at else curve[-1])  # fmt: skip
        frozen = study.trials[-1]
        out.append((pruner._get_bracket_id(study, frozen), pruned_at))
    return out


def _our_decisions(curves: list[list[float]], rule: HyperbandRule) -> list[Any]:
    records: list[TrialRecord] = []
    out = []
    for number, curve in enumerate(curves):
        seen: dict[int, float] = {}
        pruned_at = None
        for step, value in enumerate(curve, start=1):
            seen[step] = value
            if rule.should_stop(_running(number, dict(seen)), step, records):
                pruned_at = step
                break
        status = TrialStatus.STOPPED if pruned_at else TrialStatus.COMPLETED
        records.append(TrialRecord(number, {}, status, seen[max(seen)], dict(seen)))
        out.append((rule.bracket(number), pruned_at))
    return out


@pytest.mark.parametrize(("minimum", "maximum", "eta"), [(1, 9, 3), (1, 27, 3), (2, 40, 2)])
def test_hyperband_decides_as_optunas_pruner(
    optuna: Any, minimum: int, maximum: int, eta: int
) -> None:
    rule = HyperbandRule(False, "hb-study", minimum, maximum, eta)
    curves = [
        [abs(math.sin(n * 1.7)) + 1 / (step + 1) for step in range(maximum)] for n in range(40)
    ]
    ours = _our_decisions(curves, rule)
    assert ours == _optuna_decisions(optuna, curves, rule)
    assert len({bracket for bracket, _ in ours}) == rule.n_brackets > 1
    assert any(at is not None for _, at in ours)  # some trials are stopped early


def test_hyperband_brackets_and_rungs() -> None:
    rule = HyperbandRule(True, "x", 1, 27, 3)
    assert rule.n_brackets == 4
    assert rule.rung_steps(0) == [1, 3, 9]
    assert rule.rung_steps(3) == []  # the last bracket runs every trial to the end
    assert rule.budgets == [27, 12, 6, 4]  # ceil(4 * 3**s / (s + 1)), as Optuna allocates


def test_hyperband_keeps_the_top_third_at_a_rung() -> None:
    rule = HyperbandRule(True, "x", 1, 9, 3)
    same = [n for n in range(200) if rule.bracket(n) == 0][:4]
    peers = [_done(n, {1: v, 2: v}) for n, v in zip(same[:3], [0.3, 0.5, 0.9], strict=True)]
    # four values at rung 1 -> the best one (4 // 3) is promoted
    assert rule.should_stop(_running(same[3], {1: 0.8}), 1, peers)
    assert not rule.should_stop(_running(same[3], {1: 0.95}), 1, peers)
    # a later step decides no rung again; the value at step 3 faces rung 3's peers (none yet)
    assert not rule.should_stop(_running(same[3], {1: 0.8, 2: 0.1}), 2, peers)
    assert not rule.should_stop(_running(same[3], {1: 0.8, 2: 0.1, 3: 0.0}), 3, peers)


def _overran(number: int, at_rung_1: float) -> TrialRecord:
    """A trial stopped at rung 1 whose script reported two more epochs before it ended."""
    return _done(number, {1: at_rung_1, 2: 0.9, 3: 0.9}, TrialStatus.STOPPED)


def test_hyperband_counts_at_a_rung_only_the_trials_promoted_to_it() -> None:
    rule = HyperbandRule(False, "x", 1, 9, 3)  # bracket 0: rungs at 1 and 3
    first, *middle, judged = [n for n in range(500) if rule.bracket(n) == 0][:7]
    leader = _done(first, {1: 0.1, 2: 0.5, 3: 0.5})
    trial = _running(judged, {1: 0.05, 2: 0.6, 3: 0.6})  # promoted at 1 (the best), 2nd at 3
    # five trials worse than the leader at rung 1 were stopped there but reported up to step 3:
    # those late values never entered rung 3, so there the trial faces the leader alone
    late = [_overran(n, 0.9 - n / 1000) for n in middle]
    assert rule.should_stop(trial, 3, [leader, *late])
    # the same five promoted at rung 1 (each the best so far there) do compete at rung 3:
    # seven values keep the best two (7 // 3), and the trial is second
    promoted = [_overran(n, 0.09 - i / 100) for i, n in enumerate(middle)]
    assert not rule.should_stop(trial, 3, [leader, *promoted])
