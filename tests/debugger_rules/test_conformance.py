"""The conformance suite of the built-in debugger rules: every registered rule fires on a series
built to trigger it and stays quiet on a healthy one (real files, read by a real trial), takes
the catalog's parameters as SageMaker sends them (strings), and agrees with the catalog."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.debugger_rules._cases import CASES
from tests.debugger_rules._series import write_series
from trainops.debugger import RuleEvaluationConditionMet, create_trial
from trainops.debugger.rules import (
    DEBUGGER_RULES,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    NOTHING_EVALUATED,
    RuleRunner,
    Verdict,
    invoke_rule,
    make_debugger_rule,
    rule_parameters,
)
from trainops.spec._debugger_catalog import CUSTOM
from trainops.spec._debugger_catalog import DEBUGGER_RULES as CATALOG

_NOW = 1_000_000.0
_LATER = _NOW + 3600.0


def _rule(name: str, path: Path, triggered: bool, parameters: dict[str, Any] | None = None) -> Any:
    case = CASES[name]
    series = case.trigger() if triggered else case.healthy()
    trial = create_trial(write_series(path / "base", series))
    others = None
    if case.other is not None:
        others = [create_trial(write_series(path / "other", case.other(triggered)))]
    given = case.parameters if parameters is None else parameters
    return make_debugger_rule(name, trial, given, others)


def test_every_catalog_rule_is_registered_and_has_a_case() -> None:
    assert set(DEBUGGER_RULES) == set(CATALOG) - {CUSTOM}  # a custom rule is the job's class
    assert set(CASES) == set(DEBUGGER_RULES)


@pytest.mark.parametrize("name", list(DEBUGGER_RULES))
def test_defaults_agree_with_the_catalog(name: str) -> None:
    ours = rule_parameters(DEBUGGER_RULES[name])
    catalog = dict(CATALOG[name].defaults)
    assert set(ours) == set(catalog), name
    for key, default in catalog.items():
        mine = ours[key]
        if isinstance(default, float | int) and not isinstance(default, bool):
            assert math.isclose(float(mine), float(default)), (name, key)
        else:
            assert mine == default, (name, key)


@pytest.mark.parametrize("name", list(DEBUGGER_RULES))
def test_fires_on_its_trigger(name: str, tmp_path: Path) -> None:
    runner = RuleRunner(_rule(name, tmp_path, True))
    verdict = runner.advance(_NOW)
    if verdict.status != ISSUES_FOUND:
        verdict = runner.advance(_LATER)  # a rule on time (StalledTrainingRule)
    assert verdict.status == ISSUES_FOUND, verdict
    assert verdict.details and "\n" not in verdict.details
    assert runner.advance(_LATER + 1, ended=True) == verdict  # a finding is final


@pytest.mark.parametrize("name", list(DEBUGGER_RULES))
def test_quiet_on_a_healthy_run(name: str, tmp_path: Path) -> None:
    runner = RuleRunner(_rule(name, tmp_path, False))
    assert runner.advance(_NOW).status == "InProgress"
    if name != "StalledTrainingRule":  # the healthy run of a rule on time is one still writing
        assert runner.advance(_LATER).status == "InProgress"
    assert runner.advance(_LATER, ended=True).status == NO_ISSUES_FOUND


@pytest.mark.parametrize("name", [n for n in DEBUGGER_RULES if n != "StalledTrainingRule"])
def test_invoke_rule_raises_the_condition_as_smdebug_does(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")  # the runs have ended
    with pytest.raises(RuleEvaluationConditionMet) as caught:
        invoke_rule(_rule(name, tmp_path / "t", True), raise_eval_cond=True)
    assert caught.value.rule_name == name
    invoke_rule(_rule(name, tmp_path / "h", False), raise_eval_cond=True)


@pytest.mark.parametrize("name", list(DEBUGGER_RULES))
def test_takes_its_parameters_as_strings(name: str, tmp_path: Path) -> None:
    """SageMaker sends every rule parameter as a string; the catalog's defaults as strings
    make the same rule."""
    strings = {
        key: ("" if value is None else ",".join(value) if isinstance(value, list) else str(value))
        for key, value in CATALOG[name].defaults.items()
        if key != "other_trials"
    }
    strings.update(
        {
            k: str(v) if not isinstance(v, list) else ",".join(v)
            for k, v in CASES[name].parameters.items()
        }
    )
    rule = _rule(name, tmp_path, True, strings)
    runner = RuleRunner(rule)
    if runner.advance(_NOW).status != ISSUES_FOUND:
        assert runner.advance(_LATER).status == ISSUES_FOUND


@pytest.mark.parametrize("name", list(DEBUGGER_RULES))
def test_refuses_a_parameter_it_does_not_take(name: str, tmp_path: Path) -> None:
    trial = create_trial(write_series(tmp_path, CASES[name].healthy()))
    with pytest.raises(ValueError, match=f"{name} has no parameter 'no_such'"):
        make_debugger_rule(name, trial, {"no_such": "1"})


def _verdict_forgetting(rule: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The rule run one step per advance, its trials forgetting after each step every step it
    says it no longer reads (as the control plane's trials do), to the job's end."""
    monkeypatch.setattr("trainops.debugger.rules._invoker.STEPS_PER_ADVANCE", 1)
    runner = RuleRunner(rule)
    for _ in range(1000):
        verdict = runner.advance(_NOW)
        if verdict.status == ISSUES_FOUND or runner.next_step > max(rule.base_trial.steps()):
            break
        keep = runner.keep_from()
        assert keep is not None
        for trial in rule.trials:
            trial.forget_before(keep)
    if verdict.status != ISSUES_FOUND:
        verdict = runner.advance(_LATER)
    return runner.advance(_LATER, ended=True) if verdict.status != ISSUES_FOUND else verdict


@pytest.mark.parametrize("triggered", [True, False], ids=["trigger", "healthy"])
@pytest.mark.parametrize("name", list(DEBUGGER_RULES))
def test_the_same_verdict_when_the_trials_forget_what_the_rule_is_done_with(
    name: str, triggered: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control plane's trials drop the steps every rule is done with (a job's tensors must
    not make it hold more and more): a rule comparing with earlier steps keeps what it needs
    (``keep_from``) or its own small state, and finds what it finds with every step kept."""
    kept = RuleRunner(_rule(name, tmp_path / "kept", triggered))
    expected = kept.advance(_NOW)
    if expected.status != ISSUES_FOUND:
        expected = kept.advance(_LATER)
    if expected.status != ISSUES_FOUND:
        expected = kept.advance(_LATER, ended=True)
    forgetting = _verdict_forgetting(_rule(name, tmp_path / "forgetting", triggered), monkeypatch)
    assert (forgetting.status, forgetting.details) == (expected.status, expected.details)


@pytest.mark.parametrize("name", [n for n in DEBUGGER_RULES if n != "StalledTrainingRule"])
def test_a_job_that_saved_nothing_ends_saying_so(name: str, tmp_path: Path) -> None:
    """NoIssuesFound (the status of a rule that found nothing), but said as what it is: a
    hook that was off (a script's interpreter without it, once) must not read as a pass."""
    empty = tmp_path / "empty"
    empty.mkdir()
    others = [create_trial(str(empty))] if CASES[name].other is not None else None
    rule = make_debugger_rule(name, create_trial(str(empty)), CASES[name].parameters, others)
    runner = RuleRunner(rule)
    assert runner.advance(_NOW).details == "no step evaluated yet"
    assert runner.advance(_LATER, ended=True) == Verdict(NO_ISSUES_FOUND, NOTHING_EVALUATED)
