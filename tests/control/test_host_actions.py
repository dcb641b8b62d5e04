"""The control plane's queue of rules' command actions for jobs' hosts: sent to the one host
they are for until it reports back, taken only from that host, bounded per job."""

from __future__ import annotations

import threading

import pytest

from tests.control._harness import ControlPlane, control_plane, wait_for
from trainops._settings import Settings
from trainops.control._host_actions import MAX_OPEN_ACTIONS, HostActions, make_action_id


def test_an_action_is_sent_to_its_host_until_it_reports() -> None:
    actions = HostActions()
    action = actions.open("job", 1, "algo-1", ["notify"], "{}", {"TRAINOPS_RULE": "r"}, 5.0)
    assert actions.commands_for("job", 1, "algo-2") == []
    assert actions.commands_for("job", 2, "algo-1") == []  # another attempt's host
    assert not action.delivered
    [command] = actions.commands_for("job", 1, "algo-1")
    assert (command.kind, command.action_id, command.words) == (
        "action",
        action.action_id,
        ["notify"],
    )
    assert (command.stdin, command.variables, command.timeout_seconds) == (
        "{}",
        {"TRAINOPS_RULE": "r"},
        5.0,
    )
    assert action.delivered and actions.commands_for("job", 1, "algo-1") == [command]  # again
    actions.finish("job", 1, "algo-1", {"action_id": action.action_id, "ran": True})
    assert action.wait(0) and action.outcome == {"action_id": action.action_id, "ran": True}
    assert actions.commands_for("job", 1, "algo-1") == []
    assert actions.close(action)


def test_only_the_host_it_was_sent_to_reports_it() -> None:
    actions = HostActions()
    action = actions.open("job", 1, "algo-1", ["notify"], "{}", {}, 5.0)
    for job, attempt, host in [("other", 1, "algo-1"), ("job", 1, "algo-2"), ("job", 2, "algo-1")]:
        actions.finish(job, attempt, host, {"action_id": action.action_id, "ran": True})
    actions.finish("job", 1, "algo-1", {"action_id": "unknown"})
    actions.finish("job", 1, "algo-1", {"ran": True})
    assert not action.wait(0) and action.outcome is None
    assert not actions.close(action)  # never sent: whoever waits may run it elsewhere
    assert actions.commands_for("job", 1, "algo-1") == []


def test_an_action_sent_again_has_the_id_the_host_has_seen() -> None:
    # A restarted control plane sends a finding's actions again: a host that ran one already
    # knows its id and reports that run instead of running it twice (agent/supervision/_actions.py).
    before = HostActions().open("job", 1, "algo-1", ["notify"], '{"time": 1.5}', {"R": "r"}, 5.0)
    actions = HostActions()
    again = actions.open("job", 1, "algo-1", ["notify"], '{"time": 1.5}', {"R": "r"}, 5.0)
    assert again.action_id == before.action_id
    with pytest.raises(ValueError, match="already waiting"):
        actions.open("job", 1, "algo-1", ["notify"], '{"time": 1.5}', {"R": "r"}, 5.0)
    others = [
        ("other", 1, "algo-1", ["notify"], '{"time": 1.5}', {"R": "r"}),
        ("job", 2, "algo-1", ["notify"], '{"time": 1.5}', {"R": "r"}),
        ("job", 1, "algo-2", ["notify"], '{"time": 1.5}', {"R": "r"}),
        ("job", 1, "algo-1", ["notify", "x"], '{"time": 1.5}', {"R": "r"}),
        ("job", 1, "algo-1", ["notify"], '{"time": 2.5}', {"R": "r"}),
        ("job", 1, "algo-1", ["notify"], '{"time": 1.5}', {"R": "s"}),
    ]
    ids = {make_action_id(*other) for other in others}
    assert len(ids) == len(others) and before.action_id not in ids


def test_a_job_has_a_bounded_number_of_open_actions() -> None:
    actions = HostActions()
    for number in range(MAX_OPEN_ACTIONS):
        actions.open("job", 1, "algo-1", ["notify"], str(number), {}, 5.0)
    with pytest.raises(ValueError, match="unfinished actions"):
        actions.open("job", 1, "algo-1", ["notify"], "more", {}, 5.0)
    actions.open("other", 1, "algo-1", ["notify"], "{}", {}, 5.0)  # another job's are its own


# Through a real control plane, with fake agents that answer actions as FAKE_ACTION says.


def _running(plane: ControlPlane, name: str, action: str) -> None:
    plane.submit(name, {"FAKE_HANG_ATTEMPTS": "1", "FAKE_ACTION": action})
    plane.wait_secondary(name, "Training")


def test_a_running_hosts_report_is_the_result(settings: Settings) -> None:
    with control_plane(settings) as plane:
        _running(plane, "acts", "report")
        controller = plane.server.controller
        outcome = controller.run_on_host("acts", ["notify", "x"], "{}", {"TRAINOPS_RULE": "r"}, 5.0)
        assert isinstance(outcome, dict)
        assert (outcome["host"], outcome["ran"], outcome["exit_code"]) == ("algo-1", True, 0)
        assert outcome["output"] == "ran notify x with {'TRAINOPS_RULE': 'r'}"
        plane.stop("acts")
        plane.wait_ended("acts")
        # After the end, no host: the caller runs it itself, and says why.
        assert controller.run_on_host("acts", ["notify"], "{}", {}, 5.0) == (
            "the job's hosts have ended"
        )


def test_a_host_that_declines_leaves_it_to_the_control_plane(settings: Settings) -> None:
    with control_plane(settings) as plane:
        _running(plane, "declines", "decline")
        outcome = plane.server.controller.run_on_host("declines", ["notify"], "{}", {}, 5.0)
        assert outcome == "host algo-1 is not running the job's script"
        plane.stop("declines")
        plane.wait_ended("declines")


def test_a_host_that_took_it_and_ended_is_a_failure_never_a_second_run(
    settings: Settings,
) -> None:
    with control_plane(settings) as plane:
        _running(plane, "silent", "silent")
        controller = plane.server.controller
        outcomes: list[object] = []
        waiter = threading.Thread(
            target=lambda: outcomes.append(
                controller.run_on_host("silent", ["notify"], "{}", {}, 300.0)
            )
        )
        waiter.start()
        wait_for(
            lambda: any(a.delivered for a in controller.core.host_actions.waiting("silent")),
            what="the host took it",
        )
        plane.stop("silent")  # the host ends without reporting it
        waiter.join(120)
        [outcome] = outcomes
        assert isinstance(outcome, dict) and (outcome["host"], outcome["ran"]) == ("algo-1", False)
        assert outcome["error"] in (
            "host algo-1 took it, then: the job's hosts have ended",
            "host algo-1 took it, then: host algo-1 has ended",
        )
        assert controller.core.host_actions.waiting("silent") == []
