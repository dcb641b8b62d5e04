"""Log long-polls hold no worker thread: hundreds of them cannot starve agents or other callers.

300 ``logs?wait=30`` polls used to take 300 threads of a 256-thread pool: ``/health`` waited
28 s and agents' reports queued behind the readers, so a short job was billed the wait too. The
polls here poll again whenever their 30 s run out, so the checks hold on a machine of any speed.
"""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.control._harness import ControlPlane, wait_for

pytestmark = pytest.mark.slow

POLLS = 300
ENDED = ("Completed", "Failed", "Stopped")


def _poll(
    url: str, token: str, path: str, answers: list[dict[str, Any]], sent: threading.Semaphore
) -> None:
    """Long-poll ``path`` again and again (each poll waits up to 30 s), keeping every answer,
    until one shows the job ended."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=90)
    first = True
    try:
        while True:
            conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
            if first:
                sent.release()  # the first request is on its way
                first = False
            reply = conn.getresponse()
            answer = json.loads(reply.read()) | {"status": reply.status}
            answers.append(answer)
            if answer["status"] != 200 or answer["TrainingJobStatus"] in ENDED:
                return
    finally:
        conn.close()


def _unread(port: int) -> tuple[int, int]:
    """(connections, those with bytes the server has not read yet) of the server's side of the
    established TCP connections to ``port``: /proc/net/tcp's rx_queue."""
    connections = unread = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if int(local.split(":")[1], 16) == port and state == "01":  # ESTABLISHED
            connections += 1
            unread += int(queues.split(":")[1], 16) > 0
    return connections, unread


def test_hundreds_of_long_polls_leave_health_and_agent_reports_alone(plane: ControlPlane) -> None:
    plane.submit("watched", {"FAKE_LINES": "0", "FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("watched", "Training")
    token = plane.client.headers["Authorization"].removeprefix("Bearer ")
    path = "/api/v1/jobs/watched/logs?after=100000&wait=30"
    answers: list[dict[str, Any]] = []
    sent = threading.Semaphore(0)
    polls = [
        threading.Thread(target=_poll, args=(plane.server.url, token, path, answers, sent))
        for _ in range(POLLS)
    ]
    for thread in polls:
        thread.start()
    for _ in range(POLLS):
        assert sent.acquire(timeout=60)
    # Every request sent has been read by the server: all 300 polls wait there.
    port = urlsplit(plane.server.url).port or 0
    wait_for(lambda: (c := _unread(port)) and c[0] >= POLLS and not c[1], 60, "the polls read")
    # Nothing can answer a poll but the end of its 30 s (after 100000, no line; no status change
    # until `watched` is stopped), and each one that does polls again, so everything below runs
    # while the server holds ~300 polls, however long it takes.
    health = httpx.get(f"{plane.server.url}/api/v1/health", timeout=20)
    assert health.status_code == 200
    # A job's agent reports (every transition, line and its exit) get through: it completes
    # while the polls wait.
    plane.submit("quick", {"FAKE_LINES": "3"})
    quick = plane.wait_ended("quick", timeout=120)
    assert quick["TrainingJobStatus"] == "Completed"
    assert all(thread.is_alive() for thread in polls)  # every poll still polling
    held = list(answers)
    assert all(a["lines"] == [] and a["TrainingJobStatus"] == "InProgress" for a in held), held
    plane.stop("watched")
    for thread in polls:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in polls)
    assert all(a["status"] == 200 for a in answers)
    assert sum(a["TrainingJobStatus"] == "Stopped" for a in answers) == POLLS  # each saw the end
    plane.wait_ended("watched")
