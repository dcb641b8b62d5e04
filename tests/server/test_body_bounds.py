"""Bodies read only after the credential, within each route's bound, and the memory a large one
took given back (server/_body.py)."""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import socket
from urllib.parse import urlsplit

import pytest
from starlette.requests import Request

from tests.control._harness import ControlPlane
from tests.server.test_agent_spawns import _agent_token
from trainops.protocol import AgentEvent
from trainops.server._agent_api import MAX_EVENTS_BODY
from trainops.server._body import read_body
from trainops.server._http import ApiError

API = "/api/v1"
JSON = {"Content-Type": "application/json"}


def _announce(plane: ControlPlane, path: str, headers: dict[str, str], length: int) -> bytes:
    """Send only the head of a request announcing ``length`` bytes of body, and read the
    answer: the server must answer without waiting for a body it was never sent."""
    url = urlsplit(plane.server.url)
    with socket.create_connection((url.hostname or "", url.port or 80), timeout=60) as conn:
        head = [f"POST {path} HTTP/1.1", f"Host: {url.hostname}", f"Content-Length: {length}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            part = conn.recv(65536)
            if not part:
                break
            reply += part
    return reply


def test_a_public_route_checks_its_token_before_reading_the_body(plane: ControlPlane) -> None:
    # No body is ever sent: a 401 proves the server did not wait for (or read) it.
    wrong = {"Authorization": "Bearer wrong", **JSON}
    for path in (f"{API}/jobs", f"{API}/job-names"):
        reply = _announce(plane, path, wrong, 10 * 1024 * 1024)
        assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
    # With the right token, a body over the route's bound is refused before it is read.
    right = {"Authorization": plane.client.headers["Authorization"], **JSON}
    reply = _announce(plane, f"{API}/job-names", right, 2 * 1024 * 1024)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"more than 1048576 bytes" in reply


def test_an_agent_body_over_its_bound_is_refused_unread(plane: ControlPlane) -> None:
    path = "/agent/v1/jobs/bounded/hosts/algo-1/events"
    guess = {"Authorization": "Bearer guess", **JSON}
    reply = _announce(plane, path, guess, MAX_EVENTS_BODY + 1)
    assert reply.startswith(b"HTTP/1.1 401"), reply[:200]  # no live token: not even its bound
    plane.submit("bounded", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("bounded", "Training")
    agent = {"Authorization": f"Bearer {_agent_token('bounded', 'algo-1')}", **JSON}
    reply = _announce(plane, path, agent, MAX_EVENTS_BODY + 1)
    assert reply.startswith(b"HTTP/1.1 413") and b"16777216 bytes" in reply, reply[:200]
    plane.client.post(f"{API}/jobs/bounded/stop")


def _batch(size: int, attempt: int) -> bytes:
    """An events body of about ``size`` bytes of tiny events (the most objects per byte)."""
    one = json.dumps({"seq": 1, "ts": 1.0, "kind": "log", "data": {"lines": ["x" * 40]}})
    count = size // (len(one) + 1)
    return b'{"attempt":%d,"events":[%s]}' % (attempt, ",".join([one] * count).encode())


def _alive_events() -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if type(thing) is AgentEvent)


def test_nothing_keeps_a_large_body_or_its_events_after_the_answer(plane: ControlPlane) -> None:
    plane.submit("big", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("big", "Training")
    token = _agent_token("big", "algo-1")
    # A wrong attempt: the whole body is read and parsed (about 20,000 events), then refused.
    body = _batch(2 * 1024 * 1024, attempt=7)
    before = _alive_events()
    url = urlsplit(plane.server.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=120)
    try:
        headers = {"Authorization": f"Bearer {token}", **JSON}
        conn.request("POST", "/agent/v1/jobs/big/hosts/algo-1/events", body, headers)
        reply = conn.getresponse()
        answer = reply.read()
    finally:
        conn.close()
    # Refused for its attempt, which only the parsed body names (the token is of attempt 1).
    assert reply.status == 401 and b"one host of one attempt" in answer, answer
    # The worker thread that parsed it keeps its last arguments and exception while idle:
    # neither may hold the body or its events (before, they kept hundreds of MB).
    assert _alive_events() - before < 100
    plane.client.post(f"{API}/jobs/big/stop")


def test_a_client_gone_before_its_whole_body_is_a_400_not_a_traceback() -> None:
    """An agent killed in the middle of a post (the chaos campaign does it) used to leave a
    ``ClientDisconnect`` traceback in the server's log: it is an answer like any other."""
    messages: list[dict[str, object]] = [
        {"type": "http.request", "body": b'{"attempt": 1, "ev', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, object]:
        return messages.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"content-length", b"99")]}
    request = Request(scope, receive)  # type: ignore[arg-type]
    with pytest.raises(ApiError) as caught:
        asyncio.run(read_body(request, 1024))
    assert (caught.value.status, caught.value.error) == (400, "client_disconnected")
