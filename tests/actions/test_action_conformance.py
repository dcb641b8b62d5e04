"""The action contract, for every kind registered in ``trainops.actions.ACTIONS``.

Parametrized over ``ACTIONS.names()``: a kind registered there runs through every test here, and
fails the first until it has a :data:`CASES` entry (a complete action of its kind that works on
this machine). Every kind: the spec accepts it (``ActionKind``), a complete action succeeds and
reports its kind, an incomplete one is a failed result and never an exception.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest

from tests.actions.test_actions import _Hook
from trainops.actions import (
    ACTIONS,
    ActionContext,
    ActionResult,
    ActionRunner,
    Finding,
    WebhookPolicy,
    run_actions,
)
from trainops.protocol import ActionSpec
from trainops.spec._profiler import ActionKind

FINDING = Finding("job-a", "slow-steps", "StepOutlier", "IssuesFound", "3 slow steps")


def _action(kind: str, url: str | None = None, argv: tuple[str, ...] | None = None) -> ActionSpec:
    return ActionSpec(type=kind, url=url, argv=argv, timeout_seconds=10.0)


CASES: dict[str, Callable[[_Hook], ActionSpec]] = {
    "stop_training": lambda hook: _action("stop_training"),
    "webhook": lambda hook: _action("webhook", url=hook.url + "/finding"),
    "command": lambda hook: _action("command", argv=(sys.executable, "-c", "print('acted')")),
}


class Stops:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, job: str, message: str) -> bool:
        self.asked.append((job, message))
        return True


@pytest.fixture
def hook() -> Iterator[_Hook]:
    server = _Hook()
    yield server
    server.close()


def _context(stops: Stops) -> ActionContext:
    return ActionContext(stops, webhooks=WebhookPolicy.from_names(["loopback"]))


def _one_line(result: ActionResult, kind: str) -> None:
    assert isinstance(result, ActionResult) and result.type == kind
    assert result.detail and "\n" not in result.detail


def test_the_spec_accepts_exactly_the_registered_kinds() -> None:
    assert set(ACTIONS.names()) == {kind.value for kind in ActionKind}


@pytest.mark.parametrize("kind", ACTIONS.names())
def test_a_complete_action_succeeds_and_says_what_it_did(kind: str, hook: _Hook) -> None:
    if kind not in CASES:
        pytest.fail(f"no conformance case for the {kind!r} action: add one to {__file__}")
    stops = Stops()
    [result] = run_actions(FINDING, [CASES[kind](hook)], _context(stops))
    _one_line(result, kind)
    assert result.ok, result


@pytest.mark.parametrize("kind", ACTIONS.names())
def test_an_action_without_its_fields_is_a_result_never_an_exception(kind: str) -> None:
    stops = Stops()
    result = ACTIONS.lookup(kind)(FINDING, _action(kind), _context(stops))
    _one_line(result, kind)


def test_an_unregistered_kind_or_a_raising_runner_is_a_failed_result() -> None:
    def raising(finding: Finding, action: ActionSpec, context: ActionContext) -> ActionResult:
        raise OSError("the runner broke")

    runner: ActionRunner = raising
    with ACTIONS.added("throwaway", runner):
        results = run_actions(
            FINDING, [_action("throwaway"), _action("teleport")], _context(Stops())
        )
    assert [(r.type, r.ok) for r in results] == [("throwaway", False), ("teleport", False)]
    assert results[0].detail == "OSError: the runner broke"
    assert "unknown action kind 'teleport' (known: stop_training, webhook, command, throwaway)" in (
        results[1].detail
    )
