"""The live pages follow the server's change stream in a real browser (Debian's Chromium through
Playwright): on the jobs page a new job appears and its status changes show without a reload,
each redraw of the table follows an answer of the stream (no polling), nothing is fetched while
nothing changes, a hidden tab stops following (freeing its waiter) and catches up when shown,
and a closed tab frees its waiter on the server. The tab fails the test on a
console error or a failed request."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.control._harness import ControlPlane, wait_for
from tests.ui._browser import Tab
from trainops.server._events import ChangeFeed

pytestmark = pytest.mark.slow
_WAIT_MS = 30_000
_EVENTS = "/ui/-/events"
_TABLE = "/ui/jobs/-/table"


def _waiters(plane: ControlPlane, tab: Tab, count: int, what: str, within: float = 30) -> None:
    """Wait until the server's feed has ``count`` followers waiting, letting Playwright work
    meanwhile: the tab's requests pass through its Python route handler (only the server may be
    reached), which runs only while a Playwright call is under way."""
    deadline = time.monotonic() + within
    while _feed(plane).waiting != count:
        assert time.monotonic() < deadline, f"{what} not reached within {within} s"
        tab.page.wait_for_timeout(50)


def _feed(plane: ControlPlane) -> ChangeFeed:
    feed: ChangeFeed = plane.server._ui.ui.events.feed  # the server's own, to count its waiters
    return feed


# Each answer of the stream, kept by the page before the page itself reads it (so before any
# redraw it leads to). Read in the page, not from Playwright's response events: a body asked of
# the browser after the fact may be gone, and one asked in an event handler lets the test go on
# before it is counted.
_KEEP_ANSWERS = """(() => {
  window.streamAnswers = [];
  const fetched = window.fetch.bind(window);
  window.fetch = async (url, options) => {
    const response = await fetched(url, options);
    if (String(url).includes("/ui/-/events") && response.status === 200) {
      window.streamAnswers.push(await response.clone().json());
    }
    return response;
  };
})();"""


def _answers(tab: Tab) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = tab.page.evaluate("window.streamAnswers")
    return answers


def test_the_jobs_page_follows_the_change_stream_without_polling(
    plane: ControlPlane, tab: Tab
) -> None:
    plane.submit("earlier", {"FAKE_LINES": "1"})
    plane.wait_ended("earlier")
    asked: list[str] = []
    tab.page.on("request", lambda request: asked.append(request.url))
    tab.page.add_init_script(_KEEP_ANSWERS)
    tab.page.goto(f"{plane.server.url}/ui/jobs")
    tab.page.evaluate("window.notReloaded = true")
    # Loaded, and its one long-poll waits on the server: nothing else is fetched meanwhile but
    # a redraw after a stream answer (the earlier job's last writes may land after its end
    # was seen, and wake the page once).
    _waiters(plane, tab, 1, "the page follows the stream")
    assert [u for u in asked if _EVENTS in u and "since=" in u]
    tables = [u for u in asked if _TABLE in u]  # read first: the answers kept only grow
    assert len(tables) <= len(answers := _answers(tab)), (tables, answers)

    plane.submit("arrives", {"FAKE_LINES": "2"})
    tab.page.locator('tr[data-job="arrives"]').wait_for(timeout=_WAIT_MS)
    plane.wait_ended("arrives")
    tab.page.locator('tr[data-job="arrives"] .s-completed').wait_for(timeout=_WAIT_MS)
    assert tab.page.evaluate("window.notReloaded") is True  # shown live, never reloaded

    # Each redraw of the table followed an answer of the stream (one naming jobs, or one that
    # came while a running job's figures moved): none came from a timer of the page.
    tables = [u for u in asked if _TABLE in u]
    answers = _answers(tab)
    assert 0 < len(tables) <= len(answers), (tables, answers)
    assert any("jobs" in a["changed"] for a in answers)
    tab.page.close()  # a closed tab's long-poll no longer waits on the server
    wait_for(lambda: _feed(plane).waiting == 0, timeout=30, what="the closed tab's waiter goes")


_SET_HIDDEN = """(hidden) => {
  Object.defineProperty(document, "hidden", { value: hidden, configurable: true });
  document.dispatchEvent(new Event("visibilitychange"));
}"""


def test_a_hidden_tab_stops_following_and_catches_up_when_shown(
    plane: ControlPlane, tab: Tab
) -> None:
    tab.page.goto(f"{plane.server.url}/ui/jobs")
    _waiters(plane, tab, 1, "the page follows the stream")
    tab.page.evaluate(_SET_HIDDEN, True)
    # Freed by the tab (its request cancelled), long before the server would end its 25 s wait.
    _waiters(plane, tab, 0, "the hidden tab's waiter goes", within=12)
    plane.submit("while-hidden", {"FAKE_LINES": "1"})
    plane.wait_ended("while-hidden")
    assert tab.page.locator('tr[data-job="while-hidden"]').count() == 0  # not followed meanwhile
    tab.page.evaluate(_SET_HIDDEN, False)  # shown again: from its cursor, the change is news
    tab.page.locator('tr[data-job="while-hidden"] .s-completed').wait_for(timeout=_WAIT_MS)
    _waiters(plane, tab, 1, "the tab follows again")
