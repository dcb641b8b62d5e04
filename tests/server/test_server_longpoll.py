"""Log long-polls hold no worker thread: hundreds of them cannot starve agents or other callers.

300 ``logs?wait=30`` polls used to take 300 threads of a 256-thread pool: ``/health`` waited
28 s and agents' reports queued behind the readers, so a short job was billed the wait too.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.control._harness import ControlPlane

pytestmark = pytest.mark.slow

POLLS = 300


def _poll(url: str, token: str, path: str, answers: list[int], opened: threading.Semaphore) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=90)
    try:
        conn.connect()
        opened.release()
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        reply = conn.getresponse()
        json.loads(reply.read())
        answers.append(reply.status)
    finally:
        conn.close()


def test_hundreds_of_long_polls_leave_health_and_agent_reports_alone(plane: ControlPlane) -> None:
    plane.submit("watched", {"FAKE_LINES": "0", "FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("watched", "Training")
    token = plane.client.headers["Authorization"].removeprefix("Bearer ")
    path = "/api/v1/jobs/watched/logs?after=100000&wait=30"
    answers: list[int] = []
    opened = threading.Semaphore(0)
    polls = [
        threading.Thread(target=_poll, args=(plane.server.url, token, path, answers, opened))
        for _ in range(POLLS)
    ]
    for thread in polls:
        thread.start()
    for _ in range(POLLS):
        assert opened.acquire(timeout=60)
    time.sleep(1.0)  # let the requests reach the server and start waiting
    # Nothing can answer the polls before `watched` is stopped (after 100000, no line; no status
    # change), so everything below runs while all 300 of them wait.
    health = httpx.get(f"{plane.server.url}/api/v1/health", timeout=20)
    assert health.status_code == 200
    # A job's agent reports (every transition, line and its exit) get through: it completes
    # while the polls still wait (none has answered: their 30 s are not up).
    plane.submit("quick", {"FAKE_LINES": "3"})
    quick = plane.wait_ended("quick", timeout=25)
    assert quick["TrainingJobStatus"] == "Completed"
    assert not answers, "a poll answered although nothing happened to its job"
    plane.stop("watched")
    for thread in polls:
        thread.join(timeout=60)
    assert answers == [200] * POLLS
    plane.wait_ended("watched")
