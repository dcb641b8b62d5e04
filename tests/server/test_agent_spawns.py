"""The agent API's spawn relay over real HTTP: one host asks, the other host gets the command in
its report's reply and says how it went, and every wrong or late request is refused."""

from __future__ import annotations

from typing import Any

import httpx
import psutil

from tests.control._harness import ControlPlane, wait_for

BASE = "/agent/v1/jobs/relay/hosts"


def _agent_token(job: str, host: str) -> str:
    """The agent token of ``host`` of ``job``, from the environment of its (fake) agent."""

    def token() -> str | None:
        for process in psutil.process_iter(["environ"]):
            env = process.info["environ"] or {}
            if env.get("TRAINOPS_AGENT_JOB") == job and env.get("TRAINOPS_AGENT_HOST") == host:
                return str(env["TRAINOPS_AGENT_TOKEN"])
        return None

    return wait_for(token, what=f"the agent of {host}")


def _call(plane: ControlPlane, method: str, path: str, token: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return plane.client.request(method, f"{BASE}/{path}", headers=headers, **kwargs)


def test_a_spawn_goes_from_one_host_to_the_other_and_back(plane: ControlPlane) -> None:
    plane.submit("relay", {"FAKE_HANG_ATTEMPTS": "1"}, instance_count=2)
    plane.wait_secondary("relay", "Training")
    token, target = _agent_token("relay", "algo-1"), _agent_token("relay", "algo-2")
    words = ["orted", "--daemonize", "-mca", "ess", '"env"']
    opened = _call(
        plane,
        "POST",
        "algo-1/spawns",
        token,
        json={"attempt": 1, "target": "algo-2", "words": words},
    )
    assert opened.status_code == 200, opened.text
    spawn = opened.json()
    assert spawn["state"] == "pending" and spawn["target"] == "algo-2"
    spawn_id = spawn["spawn_id"]

    # The target finds it among the commands of its next report, until it says it started.
    reply = _call(plane, "POST", "algo-2/events", target, json={"attempt": 1, "events": []})
    [command] = [c for c in reply.json()["commands"] if c["kind"] == "spawn"]
    assert command["spawn_id"] == spawn_id and command["words"] == words
    other = _call(plane, "POST", "algo-1/events", token, json={"attempt": 1, "events": []})
    assert all(c["kind"] != "spawn" for c in other.json()["commands"])  # only the target's

    report = {"attempt": 1, "state": "started"}
    assert _call(plane, "POST", f"algo-1/spawns/{spawn_id}", token, json=report).status_code == 401
    assert _call(plane, "POST", f"algo-2/spawns/{spawn_id}", target, json=report).status_code == 200
    reply = _call(plane, "POST", "algo-2/events", target, json={"attempt": 1, "events": []})
    assert all(c["kind"] != "spawn" for c in reply.json()["commands"])  # delivered: not again

    ended = {"attempt": 1, "state": "exited", "exit_code": 0}
    assert _call(plane, "POST", f"algo-2/spawns/{spawn_id}", target, json=ended).status_code == 200
    status = _call(plane, "GET", f"algo-1/spawns/{spawn_id}", token, params={"attempt": 1})
    assert status.json() == {
        "spawn_id": spawn_id,
        "target": "algo-2",
        "state": "exited",
        "exit_code": 0,
        "error": None,
    }
    # An ended spawn stays as it ended.
    late = {"attempt": 1, "state": "failed", "error": "late"}
    assert _call(plane, "POST", f"algo-2/spawns/{spawn_id}", target, json=late).json()["state"] == (
        "exited"
    )
    plane.stop("relay")
    plane.wait_ended("relay")


def test_wrong_and_late_spawns_are_refused(plane: ControlPlane) -> None:
    plane.submit("relay", {"FAKE_HANG_ATTEMPTS": "1"}, instance_count=2)
    plane.wait_secondary("relay", "Training")
    token, target = _agent_token("relay", "algo-1"), _agent_token("relay", "algo-2")

    def open_spawn(body: dict[str, Any], who: str = "algo-1", auth: str = token) -> httpx.Response:
        return _call(plane, "POST", f"{who}/spawns", auth, json={"attempt": 1, **body})

    assert open_spawn({"target": "algo-2", "words": ["true"]}, auth="guess").status_code == 401
    unknown = open_spawn({"target": "algo-9", "words": ["true"]})
    assert unknown.status_code == 400 and "no host 'algo-9'" in unknown.text
    assert open_spawn({"target": "algo-2", "words": []}).status_code == 400
    nul = open_spawn({"target": "algo-2", "words": ["a\x00b"]})
    assert nul.status_code == 400 and "NUL" in nul.text
    huge = open_spawn({"target": "algo-2", "words": ["x" * 300_000]})
    assert huge.status_code == 400 and "bytes" in huge.text
    missing = _call(plane, "GET", "algo-1/spawns/nope", token, params={"attempt": 1})
    assert missing.status_code == 404

    pending = open_spawn({"target": "algo-2", "words": ["sleep", "1"]}).json()["spawn_id"]
    pending_again = {"attempt": 1, "state": "pending"}
    refused = _call(plane, "POST", f"algo-2/spawns/{pending}", target, json=pending_again)
    assert refused.status_code == 400
    # A host's token speaks for that host only: algo-1's cannot act as the target.
    forged = _call(
        plane, "POST", f"algo-2/spawns/{pending}", token, json={"attempt": 1, "state": "started"}
    )
    assert forged.status_code == 401

    plane.stop("relay")
    plane.wait_ended("relay")
    # The job has ended: its tokens are revoked, so nothing is asked or opened any more.
    status = _call(plane, "GET", f"algo-1/spawns/{pending}", token, params={"attempt": 1})
    assert status.status_code == 401
    assert open_spawn({"target": "algo-2", "words": ["true"]}).status_code == 401
