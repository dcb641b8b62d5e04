"""The job page (``/ui/jobs/{job}``) over HTTP against a real server with fake agents: what a
job wrote shown as text, the log followed live, filtered, searched and paged, metrics drawn from
the server's downsampled series, the stop button's CSRF defence, and bad queries refused in one
line. (The conformance suite loads it in the browser too.)"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.control._harness import ControlPlane, wait_for
from tests.ui._jobs import HOSTILE
from trainops._settings import Settings
from trainops.protocol import AgentEvent, EventKind
from trainops.server.ui import PAGES
from trainops.store import MetadataStore


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def _lines(fragment: str) -> list[str]:
    return re.findall(r'<td class="line">([^<]*)</td>', fragment)


def test_the_page_is_registered_and_the_jobs_page_links_to_it(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    assert PAGES["job"].path == "/ui/jobs/{job}"
    plane.submit("linked")
    plane.wait_ended("linked")
    assert 'href="/ui/jobs/linked"' in browser_session.get("/ui/jobs").text


def test_a_hostile_job_is_shown_as_text_everywhere(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    env = {"FAKE_FAIL_HOST": "algo-1", "FAKE_FAIL_REASON": HOSTILE, "FAKE_LINES": "4"}
    plane.submit("hostile", env, hyperparameters={"note<b>": HOSTILE})
    plane.wait_ended("hostile")
    answer = browser_session.get("/ui/jobs/hostile")
    assert answer.status_code == 200, answer.text
    page = answer.text
    assert "<script>window.injected" not in page and '<i id="injected">' not in page
    assert page.count("&lt;script&gt;window.injected = 1&lt;/script&gt;") >= 2  # reason, hyperp.
    assert "note&lt;b&gt;" in page
    assert _lines(page) == [f"algo-1 line {i}" for i in range(4)]  # followed: the last lines
    for metric in ("loss", "step"):  # each metric a chart, from the downsampled series
        assert f"<title>{metric}</title>" in page
    assert "<h2>Spec</h2>" in page and "ResourceConfig:" in page
    assert "<td>OnDemandCostUsd</td>" in page and "<td>Interruptions</td><td>0</td>" in page
    assert "Failed" in page


def test_the_log_is_filtered_searched_and_paged_on_the_server(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    plane.submit("talker", {"FAKE_LINES": "5"})
    plane.wait_ended("talker")
    base = "/ui/jobs/talker/-/log"
    assert _lines(browser_session.get(f"{base}?q=LINE+3").text) == ["algo-1 line 3"]
    assert _lines(browser_session.get(f"{base}?stream=stderr").text) == []
    assert _lines(browser_session.get(f"{base}?host=algo-9").text) == []
    paged = browser_session.get("/ui/jobs/talker?after=0&q=line").text
    assert _lines(paged) == [f"algo-1 line {i}" for i in range(5)]
    assert 'rel="next"' in paged and "data-follow" not in paged.split('id="log"')[1][:40]


@pytest.mark.slow
def test_a_running_jobs_log_and_metrics_arrive_live(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    plane.submit("live", {"FAKE_LINES": "1000", "FAKE_LINE_DELAY": "0.02"})
    page = browser_session.get("/ui/jobs/live").text
    assert 'data-follow="/ui/jobs/live/-/log?"' in page
    assert 'data-live="/ui/jobs/live/-/metrics"' in page

    def shown(line: str) -> bool:
        return line in _lines(browser_session.get("/ui/jobs/live/-/log").text)

    wait_for(lambda: shown("algo-1 line 1"), what="a first line in the live part")
    # Past the first page: the live part follows the end, not the start.
    wait_for(lambda: shown("algo-1 line 260"), what="a line past the first page, live")
    points = re.compile(r"loss <small>(\d+) points")

    def loss_points() -> int:
        found = points.search(browser_session.get("/ui/jobs/live/-/metrics").text)
        return int(found.group(1)) if found else 0

    first = wait_for(loss_points, what="a loss chart")
    wait_for(lambda: loss_points() > first, what="more loss points in the live chart")
    plane.stop("live")


def test_a_follower_long_polls_the_log_part_until_a_line_arrives(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    plane.submit("slow", {"FAKE_LINES": "3", "FAKE_LINE_DELAY": "1"})
    plane.wait_secondary("slow", "Training")
    cursor = re.compile(r'data-next="(\d+)" data-ended="(\d)"')
    part = browser_session.get("/ui/jobs/slow/-/log").text
    while len(_lines(part)) < 3:  # each answer comes when a line arrives, not on a clock
        found = cursor.search(part)
        assert found is not None and found.group(2) == "0", part
        waited = browser_session.get(f"/ui/jobs/slow/-/log?since={found.group(1)}&wait=20").text
        assert len(_lines(waited)) > len(_lines(part)), "the long-poll came back with no line"
        part = waited
    assert _lines(part) == [f"algo-1 line {i}" for i in range(3)]


def test_the_stop_button_needs_the_csrf_token_and_a_same_site_origin(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    plane.submit("victim", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("victim", "Training")
    page = browser_session.get("/ui/jobs/victim").text
    assert 'action="/ui/jobs/victim/-/stop"' in page
    csrf, origin = _csrf(page), plane.server.url
    action = "/ui/jobs/victim/-/stop"
    refused = [
        browser_session.post(action, data={"csrf": csrf}, headers={"Origin": "http://evil.test"}),
        browser_session.post(action, data={"csrf": "x"}, headers={"Origin": origin}),
        browser_session.post(action, data={"csrf": csrf}),  # no Origin
    ]
    assert [r.status_code for r in refused] == [403, 403, 403]
    assert plane.describe("victim")["TrainingJobStatus"] == "InProgress"
    stopped = browser_session.post(action, data={"csrf": csrf}, headers={"Origin": origin})
    assert stopped.status_code == 303 and stopped.headers["location"] == "/ui/jobs/victim"
    assert plane.wait_ended("victim")["TrainingJobStatus"] == "Stopped"


@pytest.mark.parametrize(
    ("query", "status", "problem"),
    [
        ("", 404, "no job named"),
        ("?rank=x", 400, "rank must be a whole number, not &#x27;x&#x27;"),
        ("?after=-1", 400, "after must be a whole number"),
        ("?stream=%3Cb%3E", 400, "stream &#x27;&lt;b&gt;&#x27; is not one of"),
        ("/-/log?since=0&wait=99", 400, "wait must be at most 25 seconds"),
    ],
)
def test_a_bad_query_or_job_is_one_line_saying_what(
    plane: ControlPlane, browser_session: httpx.Client, query: str, status: int, problem: str
) -> None:
    if query:
        plane.submit("known")
    answer = browser_session.get(f"/ui/jobs/{'known' if query else 'ghost'}{query}")
    assert answer.status_code == status
    assert problem in answer.text
    assert "Traceback" not in answer.text


def test_hostile_log_lines_and_metric_names_are_text(
    plane: ControlPlane, browser_session: httpx.Client, settings: Settings
) -> None:
    plane.submit("writer", {"FAKE_LINES": "1"})
    plane.wait_ended("writer")
    store = MetadataStore(settings.db_path)
    try:
        (host,) = store.hosts("writer", plane.describe("writer")["Attempt"])
        seq = int(host.acked_seq) + 1
        events = [
            AgentEvent(seq, 1.0, EventKind.LOG, {"stream": "stderr", "lines": [HOSTILE]}),
            AgentEvent(seq + 1, 2.0, EventKind.METRIC, {"name": HOSTILE, "value": 1.0}),
        ]
        assert store.ingest("writer", "algo-1", host.attempt, events) is not None
    finally:
        store.close()
    for url in ("/ui/jobs/writer", "/ui/jobs/writer/-/log", "/ui/jobs/writer/-/metrics"):
        text = browser_session.get(url).text
        assert "<script>window.injected" not in text and '<i id="injected">' not in text, url
        assert "&lt;script&gt;window.injected = 1&lt;/script&gt;" in text, url


def test_many_followers_all_wait_for_the_next_line(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    """Twelve open tabs following one log (more than the worker threads a part could hold
    waiting, once): each long-poll waits on the event loop and comes back with the new line."""
    plane.submit("watched", {"FAKE_LINES": "2", "FAKE_LINE_DELAY": "3"})
    plane.wait_secondary("watched", "Training")
    part = browser_session.get("/ui/jobs/watched/-/log").text
    while not _lines(part):
        found = re.search(r'data-next="(\d+)"', part)
        assert found is not None
        part = browser_session.get(f"/ui/jobs/watched/-/log?since={found.group(1)}&wait=20").text
    found = re.search(r'data-next="(\d+)"', part)
    assert found is not None and _lines(part) == ["algo-1 line 0"], part
    url = f"/ui/jobs/watched/-/log?since={found.group(1)}&wait=20"

    def follow(_: int) -> list[str]:
        with httpx.Client(
            base_url=str(browser_session.base_url),
            cookies=browser_session.cookies,
            headers=browser_session.headers,
            timeout=60,
        ) as tab:
            return _lines(tab.get(url).text)

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(follow, range(12)))
    assert answers == [["algo-1 line 0", "algo-1 line 1"]] * 12
    plane.wait_ended("watched")
