"""Debian's Chromium driven by Playwright for the UI tests, each tab watched for trouble.

Playwright cannot download its own browsers here, so the browser is launched by its executable
path (``make install-chromium``); without Chromium or Playwright the tests skip with the reason
(fail in CI: tests/_support/system.py). Every :class:`Tab` records each console error (Content-
Security-Policy violations are console errors), uncaught page error, failed request and 4xx/5xx
answer it sees, and lets the page reach nothing but the server's origin: a request anywhere else
is aborted and recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tests._support.system import require, require_extra

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Route

_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-extensions", "--no-first-run"]


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium (Debian's) for as long as the block lasts."""
    executable = require("chromium")
    sync_api: Any = require_extra("dev", "playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), args=_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Tab:
    """A page of ``browser`` in a context of its own, that may only reach ``origin`` (and
    ``also``); ``allow_4xx`` when the test expects refusals."""

    def __init__(
        self, browser: Browser, origin: str, *, allow_4xx: bool = False, also: str = ""
    ) -> None:
        self.origins = {origin.rstrip("/"), also.rstrip("/")} - {""}
        self.problems: list[str] = []
        self.allow_4xx = allow_4xx
        self.context: BrowserContext = browser.new_context(viewport={"width": 1280, "height": 800})
        self.context.route("**/*", self._only_the_server)
        self.page: Page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._answered)

    def _only_the_server(self, route: Route) -> None:
        url = route.request.url
        if _origin(url) in self.origins:
            route.continue_()
        else:
            self.problems.append(f"request outside the server: {url}")
            route.abort()

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def _failed(self, request: Any) -> None:
        if request.failure == "net::ERR_ABORTED":  # cut short by the page navigating away (or
            return  # by _only_the_server, which records those itself)
        self.problems.append(f"failed request {request.url}: {request.failure}")

    def _answered(self, response: Any) -> None:
        if response.status >= 400 and not (self.allow_4xx and response.status < 500):
            self.problems.append(f"{response.status} from {response.url}")

    def sign_in(self, link: str) -> None:
        """Open a one-time login link; the tab then holds the session cookie."""
        self.page.goto(link)
        assert urlsplit(self.page.url).path != "/ui/login", self.page.content()[:2000]

    def close(self) -> None:
        self.context.close()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
