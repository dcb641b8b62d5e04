"""Fixtures of the web UI tests: a real control plane (fake agents) reached over real HTTP, a
browser client signed in to it, and, for the browser tests, Debian's Chromium driven by
Playwright (tests/ui/_browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.control import conftest as _control
from tests.control._harness import ControlPlane, control_plane
from tests.ui._browser import Tab, chromium
from trainops._settings import Settings

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# The control-plane tests' settings fixture (fixed capacity, no agent left behind), shared.
settings = _control.settings


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


@pytest.fixture
def visitor(plane: ControlPlane) -> Iterator[httpx.Client]:
    """An HTTP client without credentials, as a browser that has not signed in is."""
    with httpx.Client(base_url=plane.server.url, timeout=60) as client:
        yield client


@pytest.fixture
def browser_session(plane: ControlPlane, visitor: httpx.Client) -> httpx.Client:
    """``visitor`` signed in with a one-time login link (it holds the session cookie)."""
    answer = visitor.get(plane.server.ui_link())
    assert answer.status_code == 303, answer.text
    return visitor


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, one for the session (skips, or fails in CI, without it)."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def tab(plane: ControlPlane, browser: Browser) -> Iterator[Tab]:
    """A tab signed in to ``plane``'s UI; the test fails if the tab saw any trouble."""
    opened = Tab(browser, plane.server.url)
    opened.sign_in(plane.server.ui_link())
    yield opened
    opened.close()
    assert opened.problems == [], "\n".join(opened.problems)
