"""The control plane's queue of rules' command actions for jobs' hosts: sent to the one host
they are for until it reports back, taken only from that host, bounded per job."""

from __future__ import annotations

import pytest

from trainops.control._host_actions import MAX_OPEN_ACTIONS, HostActions


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


def test_a_job_has_a_bounded_number_of_open_actions() -> None:
    actions = HostActions()
    for _ in range(MAX_OPEN_ACTIONS):
        actions.open("job", 1, "algo-1", ["notify"], "{}", {}, 5.0)
    with pytest.raises(ValueError, match="unfinished actions"):
        actions.open("job", 1, "algo-1", ["notify"], "{}", {}, 5.0)
    actions.open("other", 1, "algo-1", ["notify"], "{}", {}, 5.0)  # another job's are its own
