"""Probes: an agent token speaks for one host of one attempt of one job, and only while both live.

A job's script holds whatever its agent holds, so these requests are what a hostile script could
send with a token it found: its own host's, a sibling host's, another job's, one whose host or
job has ended, or one for another attempt. Each is refused (401), over real HTTP, against a
real control plane with fake agents. An unauthenticated request is refused before its body is
read, so a 64 MiB body costs the server nothing.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.control._harness import (
    ControlPlane,
    control_plane,
    kill_leftover_agents,
    wait_for,
)
from tests.server.test_agent_spawns import _agent_token
from trainops._settings import LocalCapacity, Settings
from trainops.backends import AgentHandle
from trainops.control import ControllerConfig

# Agents told to stop that ignore it are killed only after this: a failing job stays up, with
# one host ended and the other running, for as long as the probes need.
_PATIENT = ControllerConfig(tick_seconds=0.1, kill_margin_seconds=600.0)


@pytest.fixture
def settings(trainops_home: Path) -> Iterator[Settings]:
    configured = Settings(
        home=trainops_home, capacity=LocalCapacity(cpus=8, memory_mb=64_000, gpus=0)
    )
    yield configured
    kill_leftover_agents(configured)


def _agent(
    plane: ControlPlane, method: str, path: str, token: str, **kwargs: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return plane.client.request(method, f"/agent/v1/jobs/{path}", headers=headers, **kwargs)


def _assignment(plane: ControlPlane, job: str, host: str, token: str, attempt: int = 1) -> int:
    path = f"{job}/hosts/{host}/assignment"
    return _agent(plane, "GET", path, token, params={"attempt": attempt}).status_code


def _forge(
    plane: ControlPlane, job: str, host: str, token: str, line: str, attempt: int = 1
) -> int:
    """Post ``line`` as the next log event of ``host``: what the store would take."""
    record = plane.server.controller.store.host(job, host, 1)
    assert record is not None
    event = {"seq": record.acked_seq + 1, "ts": 1.0, "kind": "log", "data": {"line": line}}
    event["data"]["stream"] = "stdout"
    body = {"attempt": attempt, "events": [event]}
    return _agent(plane, "POST", f"{job}/hosts/{host}/events", token, json=body).status_code


def _answer(conn: socket.socket) -> tuple[int, Any]:
    """The status and JSON body of the HTTP answer read from ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536) or b"\r\n\r\n"
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.lower().split(": ", 1) for line in lines[1:])
    while len(body) < int(fields.get("content-length", "0")):
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split(" ")[1]), json.loads(body)


def _host_status(plane: ControlPlane, job: str, host: str) -> str:
    return next(h["Status"] for h in plane.describe(job)["Hosts"] if h["Host"] == host)


def test_a_token_acts_only_for_its_own_live_host(settings: Settings) -> None:
    with control_plane(settings, _PATIENT) as plane:
        # alpha: algo-2 fails, algo-1 ignores the stop that follows (the job stays up);
        # beta: one host that trains until stopped.
        failing = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_IGNORE_STOP": "1", "FAKE_FAIL_HOST": "algo-2"}
        # algo-2 fails only once algo-1 is in Training: a stop that reaches algo-1 before its
        # agent is up ends the job at once (CI caught that race on a loaded machine).
        failing["FAKE_READY_FILE"] = str(settings.home / "alpha-algo-1-training")
        plane.submit("alpha", failing, instance_count=2)
        plane.submit("beta", {"FAKE_HANG_ATTEMPTS": "1"})
        first, second = _agent_token("alpha", "algo-1"), _agent_token("alpha", "algo-2")
        other = _agent_token("beta", "algo-1")
        assert len({first, second, other}) == 3  # a token per host, not per job
        wait_for(lambda: _host_status(plane, "alpha", "algo-2") == "Failed", what="algo-2 ended")
        assert plane.describe("alpha")["TrainingJobStatus"] == "InProgress"

        assert _assignment(plane, "alpha", "algo-1", first) == 200  # its own: accepted
        assert _assignment(plane, "alpha", "algo-2", first) == 401  # a sibling host's
        assert _forge(plane, "alpha", "algo-2", first, "as algo-2") == 401
        assert _assignment(plane, "beta", "algo-1", first) == 401  # another job's
        assert _forge(plane, "beta", "algo-1", first, "as beta") == 401
        assert _assignment(plane, "alpha", "algo-1", other) == 401
        assert _assignment(plane, "alpha", "algo-1", first, attempt=2) == 401  # another attempt
        assert _forge(plane, "alpha", "algo-1", first, "attempt 2", attempt=2) == 401
        # algo-2 has ended: its token is revoked, for events, assignment and spawns alike.
        assert _forge(plane, "alpha", "algo-2", second, "late line") == 401
        assert _assignment(plane, "alpha", "algo-2", second) == 401
        spawn = {"attempt": 1, "target": "algo-1", "words": ["sh", "-c", "id"]}
        assert _agent(
            plane, "POST", "alpha/hosts/algo-2/spawns", second, json=spawn
        ).status_code == (401)

        # beta stops: its token no longer posts a line nor fetches the spec (with its secrets).
        plane.stop("beta")
        assert plane.wait_ended("beta")["TrainingJobStatus"] == "Stopped"
        assert _forge(plane, "beta", "algo-1", other, "accuracy=1.0") == 401
        assert _assignment(plane, "beta", "algo-1", other) == 401
        assert "accuracy=1.0" not in plane.log_lines("beta")
        assert not any("late line" in line or "as " in line for line in plane.log_lines("alpha"))

        # End alpha: its ignoring agent is killed, and with it the job.
        for handle in plane.agent_handles("alpha"):
            plane.server.controller.backend.kill(AgentHandle(handle.data))
        plane.wait_ended("alpha")
        assert _assignment(plane, "alpha", "algo-1", first) == 401


def test_an_unauthenticated_body_is_refused_before_it_is_read(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("gamma", {"FAKE_HANG_ATTEMPTS": "1"})
        token = _agent_token("gamma", "algo-1")
        url = urlsplit(plane.server.url)
        size = 64 * 1024 * 1024 - 1  # within the route's bound: only the token can refuse it
        for given in ("Bearer guess", None, f"Bearer {token}x"):
            auth = f"Authorization: {given}\r\n" if given else ""
            head = (
                "POST /agent/v1/jobs/gamma/hosts/algo-1/events HTTP/1.1\r\n"
                f"Host: {url.hostname}:{url.port}\r\n{auth}"
                f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
            )
            with socket.create_connection((url.hostname, url.port), timeout=60) as conn:
                conn.sendall(head.encode() + b'{"attempt": 1, "events": [')
                # Not one more byte is sent: the whole answer comes without the body.
                status, body = _answer(conn)
            assert status == 401, body
            assert body["detail"]["error"] == "unauthorized"
        plane.stop("gamma")
        plane.wait_ended("gamma")
