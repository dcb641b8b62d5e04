"""Every profiler rule in the table passes the same checks (the rules' conformance suite).

A rule added to ``trainops.rules.RULES`` is picked up here and must also get a trigger in
``tests/rules/_data.py`` (or be listed among the rules that never fire).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.rules import _data
from trainops.profiler import Series
from trainops.rules import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    RULES,
    STATUSES,
    ProfilerData,
    RuleResult,
    make_rule,
)
from trainops.spec._rule_catalog import PROFILER_RULES

NAMES = RULES.names()


def _checked(result: RuleResult) -> RuleResult:
    assert result.status in STATUSES
    assert isinstance(result.details, str) and result.details and "\n" not in result.details
    text = json.dumps(result.to_json(), allow_nan=False)
    assert RuleResult.from_json(json.loads(text)).to_json() == result.to_json()
    return result


def test_the_table_holds_every_rule_of_the_catalog() -> None:
    assert set(RULES) == set(PROFILER_RULES)
    assert all(cls.name == name for name, cls in RULES.items())


@pytest.mark.parametrize("name", NAMES)
def test_made_with_the_catalog_defaults(name: str) -> None:
    rule = make_rule(name)
    assert rule.parameters == dict(PROFILER_RULES[name].defaults)


@pytest.mark.parametrize("name", NAMES)
def test_empty_data_waits_while_running_and_settles_at_the_end(name: str) -> None:
    running = _checked(make_rule(name).evaluate(_data.empty()))
    assert running.status in (IN_PROGRESS, NO_ISSUES_FOUND)
    ended = _checked(make_rule(name).evaluate(_data.empty(ended=True)))
    assert ended.status == NO_ISSUES_FOUND


@pytest.mark.parametrize("name", NAMES)
def test_quiet_on_a_healthy_job(name: str) -> None:
    result = _checked(make_rule(name).evaluate(_data.healthy()))
    assert result.status == NO_ISSUES_FOUND, result
    assert result.recommendation == ""


@pytest.mark.parametrize("name", NAMES)
def test_fires_on_data_built_to_trigger_it(name: str) -> None:
    if name in _data.NEVER_FIRE:
        for trigger in _data.TRIGGERS.values():
            assert _checked(make_rule(name).evaluate(trigger())).status == NO_ISSUES_FOUND
        return
    result = _checked(make_rule(name).evaluate(_data.trigger(name)))
    assert result.status == ISSUES_FOUND, result
    assert result.recommendation and result.evidence


@pytest.mark.parametrize("name", NAMES)
def test_quiet_without_gpu_metrics(name: str) -> None:
    result = _checked(make_rule(name).evaluate(_data.no_gpu()))
    assert result.status == NO_ISSUES_FOUND, result


@pytest.mark.parametrize(
    "name", [n for n in NAMES if n in PROFILER_RULES and "patience" in PROFILER_RULES[n].defaults]
)
def test_patience_is_respected(name: str) -> None:
    patience = int(PROFILER_RULES[name].defaults["patience"])
    full = _data.trigger(name)
    # The same trigger, cut to its first `patience` points of every series, while running.
    cut = ProfilerData(
        system={h: _head(s, patience) for h, s in full.system.items()},
        steps=full.steps,
        dataloader={k: _head(s, patience) for k, s in full.dataloader.items()},
        meta=full.meta,
        job_start=full.job_start,
        now=full.now,
    )
    if name == "Dataloader":  # patience skips fetch times; the worker count needs no warm-up
        assert make_rule(name).evaluate(cut).status == ISSUES_FOUND
        assert "fetch_p50" not in make_rule(name).evaluate(cut).evidence
        return
    assert _checked(make_rule(name).evaluate(cut)).status == IN_PROGRESS
    ended = replace(cut, job_end=_data.T0 + 10)
    assert make_rule(name).evaluate(ended).status == NO_ISSUES_FOUND


def _head(series: Series, n: int) -> Series:
    return Series(list(series.columns), series.rows[:n], dict(series.header))
