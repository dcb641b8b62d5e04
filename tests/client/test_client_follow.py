"""Following a job over a scripted API: every line once, every transition once, stop at the end."""

from __future__ import annotations

from typing import Any

from tests.client._scripted_api import ScriptedAPI
from trainops.client import (
    Client,
    JobFollower,
    follow,
    format_log_line,
    format_transition,
    page_lines,
)

API = "/api/v1/jobs/j"


def _line(cursor: int, text: str, host: str = "algo-1") -> dict[str, Any]:
    return {"cursor": cursor, "host": host, "stream": "stdout", "timestamp": "t", "line": text}


def _logs(lines: list[dict[str, Any]], nxt: int, status: str, secondary: str) -> tuple[int, Any]:
    return 200, {
        "lines": lines,
        "next": nxt,
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
    }


def _description(status: str, *secondaries: str) -> tuple[int, Any]:
    transitions = [
        {"Status": s, "StartTime": f"2024-06-01T10:00:0{i}Z", "StatusMessage": f"{s} now"}
        for i, s in enumerate(secondaries)
    ]
    return 200, {"TrainingJobStatus": status, "SecondaryStatusTransitions": transitions}


def test_follow_reports_lines_and_transitions_once_and_returns_the_end(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/logs")] = [
        _logs([], 0, "InProgress", "Starting"),
        _logs([_line(1, "epoch 1"), _line(2, "epoch 2", "algo-2")], 2, "InProgress", "Training"),
        _logs([_line(3, "done")], 3, "Completed", "Completed"),
        _logs([], 3, "Completed", "Completed"),
    ]
    api.routes[("GET", API)] = [
        _description("InProgress", "Starting"),
        _description("InProgress", "Starting", "Training"),
        _description("Completed", "Starting", "Training", "Uploading", "Completed"),
    ]
    lines: list[str] = []
    transitions: list[str] = []
    with Client(api.url) as client:
        final = follow(client, "j", lambda x: lines.append(x["line"]), lambda t: transitions.append(t["Status"]), poll_wait=0)  # fmt: skip
    assert lines == ["epoch 1", "epoch 2", "done"]
    assert transitions == ["Starting", "Training", "Uploading", "Completed"]
    assert final["TrainingJobStatus"] == "Completed"
    cursors = [dict(r.query)["after"] for r in api.requests if r.path.endswith("/logs")]
    assert cursors == ["0", "0", "2", "3"]


def test_the_log_is_drained_after_the_job_ends(api: ScriptedAPI) -> None:
    page = [_line(i, f"l{i}") for i in range(1, 1001)]
    api.routes[("GET", f"{API}/logs")] = [
        _logs([], 0, "Failed", "Failed"),
        _logs(page, 1000, "Failed", "Failed"),
        _logs([_line(1001, "last")], 1001, "Failed", "Failed"),
        _logs([], 1001, "Failed", "Failed"),
    ]
    api.routes[("GET", API)] = _description("Failed", "Starting", "Failed")
    seen: list[str] = []
    with Client(api.url) as client:
        final = JobFollower(client, "j", lambda x: seen.append(x["line"]), poll_wait=0).follow()
    assert final["TrainingJobStatus"] == "Failed"
    assert len(seen) == 1001 and seen[-1] == "last"


def test_a_follower_resumes_where_it_stopped(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/logs")] = [
        _logs([_line(1, "a")], 1, "InProgress", "Training"),
        _logs([], 1, "Stopped", "Stopped"),
    ]
    api.routes[("GET", API)] = [
        _description("InProgress", "Starting", "Training"),
        _description("Stopped", "Starting", "Training", "Stopping", "Stopped"),
    ]
    transitions: list[str] = []
    with Client(api.url) as client:
        follower = JobFollower(
            client, "j", lambda _x: None, lambda t: transitions.append(t["Status"])
        )
        follower.check_transitions()
        follower.cursor = 1
        follower.follow()
    assert transitions == ["Starting", "Training", "Stopping", "Stopped"]


def test_formats() -> None:
    assert format_log_line(_line(1, "loss=0.5", "algo-2")) == "[algo-2] loss=0.5"
    transition = {"Status": "Training", "StartTime": "2024-06-01T10:00:05.123+00:00", "StatusMessage": "Training in progress"}  # fmt: skip
    assert format_transition(transition) == "2024-06-01 10:00:05 Training: Training in progress"
    assert format_transition({"Status": "Pending", "StartTime": None}) == "- Pending"


def test_a_page_of_runs_reads_as_its_lines_and_is_asked_for() -> None:
    reply = {
        "runs": [
            {
                "cursor": 7,
                "host": "algo-1",
                "stream": "stdout",
                "timestamp": "t1",
                "lines": ["a", "b"],
            },
            {
                "cursor": 20,
                "host": "algo-2",
                "stream": "stderr",
                "timestamp": "t2",
                "rank": 3,
                "lines": ["c"],
            },
        ],
        "next": 20,
    }
    assert page_lines(reply) == [
        {"cursor": 7, "host": "algo-1", "stream": "stdout", "timestamp": "t1", "line": "a"},
        {"cursor": 8, "host": "algo-1", "stream": "stdout", "timestamp": "t1", "line": "b"},
        {
            "cursor": 20,
            "host": "algo-2",
            "stream": "stderr",
            "timestamp": "t2",
            "line": "c",
            "rank": 3,
        },
    ]
    assert page_lines({"lines": [_line(1, "x")]}) == [_line(1, "x")]


def test_a_follower_takes_pages_of_runs_and_hands_them_on_whole(api: ScriptedAPI) -> None:
    run = {"cursor": 1, "host": "algo-1", "stream": "stdout", "timestamp": "t", "lines": ["a", "b"]}
    api.routes[("GET", f"{API}/logs")] = [
        (
            200,
            {
                "runs": [run],
                "next": 2,
                "TrainingJobStatus": "Completed",
                "SecondaryStatus": "Completed",
            },
        ),
        (
            200,
            {
                "runs": [],
                "next": 2,
                "TrainingJobStatus": "Completed",
                "SecondaryStatus": "Completed",
            },
        ),
    ]
    api.routes[("GET", API)] = _description("Completed", "Starting", "Completed")
    pages: list[list[str]] = []
    with Client(api.url) as client:
        follower = JobFollower(
            client, "j", lambda _x: None, on_lines=lambda ls: pages.append([x["line"] for x in ls])
        )
        follower.follow()
    assert pages == [["a", "b"]] and follower.cursor == 2
    asked = [r.query for r in api.requests if r.path.endswith("/logs")]
    assert asked and all(("format", "runs") in query for query in asked)
