"""The change stream over HTTP against a real server (fake agents): ``GET /api/v1/events`` with
the API token and ``/ui/-/events`` with the UI's session cookie, each refused without its
credential or from another origin; a follower is woken by the store's commit of a topic it
asked for (and only those), a wait without news ends cleanly with the same cursor, a bad value
is one line naming it, and a client that hangs up frees its waiter at once."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.control._harness import ControlPlane, wait_for
from trainops.client import Client
from trainops.server._events import ChangeFeed

_API = "/api/v1/events"
_UI = "/ui/-/events"
_EVIL = {"Origin": "https://evil.example"}


def _feed(plane: ControlPlane) -> ChangeFeed:
    feed: ChangeFeed = plane.server._ui.ui.events.feed  # the server's own, to count its waiters
    return feed


def _cursor(client: httpx.Client, path: str = _API) -> str:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.json()["changed"] == []
    return str(answer.json()["cursor"])


def test_the_api_stream_needs_the_token_and_the_uis_needs_the_session(
    plane: ControlPlane, visitor: httpx.Client
) -> None:
    refused = visitor.get(_API)
    assert refused.status_code == 401 and "token" in refused.json()["detail"]["message"]
    wrong = visitor.get(_API, headers={"Authorization": "Bearer guess"})
    assert wrong.status_code == 401
    assert visitor.get(_UI).status_code == 401  # no session cookie
    assert (
        visitor.get(_UI, headers={"Authorization": f"Bearer {plane.server.token}"}).status_code
        == 401
    )
    _cursor(plane.client)
    visitor.get(plane.server.ui_link())  # signed in: the cookie is enough
    _cursor(visitor, _UI)


def test_another_origin_is_refused(plane: ControlPlane, browser_session: httpx.Client) -> None:
    assert plane.client.get(_API, headers=_EVIL).status_code == 403
    assert browser_session.get(_UI, headers=_EVIL).status_code == 403
    host = {"Host": "evil.example"}
    assert browser_session.get(_UI, headers=host).status_code == 403


def test_a_new_job_wakes_a_follower_of_jobs(plane: ControlPlane) -> None:
    since = _cursor(plane.client)
    answers: list[dict[str, Any]] = []

    def follow() -> None:
        query = {"topics": "jobs", "since": since, "wait": "60"}
        answers.append(plane.client.get(_API, params=query).json())

    follower = threading.Thread(target=follow)
    follower.start()
    wait_for(lambda: _feed(plane).waiting == 1, timeout=30, what="the follower waits")
    plane.submit("woken", {"FAKE_LINES": "1"})
    # Woken by the commit: long before its 60 s wait is over (which would say "jobs" too).
    wait_for(lambda: answers, timeout=30, what="the follower is woken")
    assert answers[0]["changed"] == ["jobs"], answers
    assert answers[0]["cursor"] != since
    plane.wait_ended("woken")


def test_a_follower_hears_only_of_its_topics(plane: ControlPlane) -> None:
    since = _cursor(plane.client)
    plane.submit("topical", {"FAKE_LINES": "3"})
    plane.wait_ended("topical")
    everything = plane.client.get(_API, params={"since": since}).json()
    assert {"jobs", "hosts", "output"} <= set(everything["changed"]), everything
    studies = plane.client.get(_API, params={"since": since, "topics": "studies"}).json()
    assert studies["changed"] == [] and studies["cursor"] == everything["cursor"]


def test_a_wait_without_news_ends_with_the_same_cursor(plane: ControlPlane) -> None:
    since = _cursor(plane.client)
    answer = plane.client.get(_API, params={"since": since, "topics": "studies", "wait": "0.3"})
    assert answer.status_code == 200 and answer.json()["changed"] == []
    assert _feed(plane).waiting == 0


def test_a_cursor_of_another_run_has_every_topic_changed(plane: ControlPlane) -> None:
    other = "0123456789ab-5"
    answer = plane.client.get(
        _API, params=[("since", other), ("topics", "jobs"), ("topics", "tuning")]
    )
    assert answer.json()["changed"] == ["jobs", "tuning"]
    assert answer.json()["cursor"].startswith(_feed(plane).run)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"since": "<script>"}, "query.since: '<script>' is not a cursor of this API"),
        ({"topics": "secrets"}, "query.topics: unknown value 'secrets'"),
        ({"wait": "1e9"}, "query.wait: Input should be less than or equal to 60"),
        ({"wait": "nan"}, "query.wait:"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(
    plane: ControlPlane, browser_session: httpx.Client, query: dict[str, str], said: str
) -> None:
    for answer in (plane.client.get(_API, params=query), browser_session.get(_UI, params=query)):
        assert answer.status_code == 400
        message = answer.json()["detail"]["message"]
        assert message.startswith(said) and "\n" not in message


def _hang_up(
    plane: ControlPlane, session: httpx.Client, path: str, waiting: Callable[[], int]
) -> None:
    """Send ``path`` (the API's token, or the UI's cookie for a ``/ui`` path) on a raw socket,
    wait until it waits on the server, close the socket: its waiter must go."""
    url = urlsplit(plane.server.url)
    credential = (
        "Cookie: " + "; ".join(f"{k}={v}" for k, v in session.cookies.items())
        if path.startswith("/ui/")
        else f"Authorization: Bearer {plane.server.token}"
    )
    request = f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\n{credential}\r\n\r\n"
    with socket.create_connection((url.hostname, url.port)) as tab:
        tab.sendall(request.encode())
        wait_for(lambda: waiting() == 1, timeout=30, what="the request waits")
    # The tab is closed: its waiter goes long before its wait is over.
    wait_for(lambda: waiting() == 0, timeout=15, what="the waiter is freed")


@pytest.mark.parametrize(
    "path",
    ["/api/v1/jobs/hung/logs?after={next}&wait=30", "/ui/jobs/hung/-/log?since={next}&wait=25"],
)
def test_a_log_follower_that_hangs_up_frees_its_waiter(
    plane: ControlPlane, browser_session: httpx.Client, path: str
) -> None:
    plane.submit("hung", {"FAKE_LINES": "1", "FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("hung", "Training")
    found = wait_for(lambda: plane.client.get("/api/v1/jobs/hung/logs").json()["lines"], timeout=30)
    cursor = found[-1]["cursor"]
    waiter = plane.server._ui.ui.output.waiter
    _hang_up(plane, browser_session, path.format(next=cursor), lambda: waiter.waiting)
    plane.stop("hung")
    plane.wait_ended("hung")


@pytest.mark.parametrize("path", [_API, _UI])
def test_a_client_that_hangs_up_frees_its_waiter(
    plane: ControlPlane, browser_session: httpx.Client, path: str
) -> None:
    since = _cursor(plane.client)
    query = f"?topics=studies&since={since}&wait=60"
    _hang_up(plane, browser_session, path + query, lambda: _feed(plane).waiting)


def test_the_client_follows_the_stream(plane: ControlPlane) -> None:
    with Client(plane.server.url, token=plane.server.token) as client:
        since = client.events()["cursor"]
        plane.submit("followed", {"FAKE_LINES": "1"})
        answer = client.events(since, topics=["jobs"], wait=30)
        assert answer["changed"] == ["jobs"] and answer["cursor"] != since
        plane.wait_ended("followed")
        quiet = client.events(answer["cursor"], topics=["studies"], wait=0.2)
        assert quiet["changed"] == []
