"""The jobs page in a real browser (Debian's Chromium through Playwright): live updates, the
stop button, a cross-site form that must not stop a job, filters and paging, the login link,
and (with ``TRAINOPS_UI_SCREENSHOTS=1``) the screenshot in docs/ui.md. Every tab fails its test
on a console error, a failed request or a request to anywhere but the server."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.control._harness import ControlPlane, control_plane
from tests.ui._browser import Tab
from tests.ui._jobs import finished_jobs
from trainops._settings import Settings

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.slow
_WAIT_MS = 30_000
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def _row(job: str) -> str:
    return f'tr[data-job="{job}"]'


def test_new_jobs_and_status_changes_arrive_live_and_the_stop_button_stops_a_job(
    plane: ControlPlane, tab: Tab
) -> None:
    tab.page.goto(f"{plane.server.url}/ui/jobs")
    assert tab.page.locator("tr[data-job]").count() == 0
    plane.submit("live-a", {"FAKE_HANG_ATTEMPTS": "1"})  # no reload from here on
    row = tab.page.locator(_row("live-a"))
    row.get_by_role("button", name="Stop live-a").wait_for(timeout=_WAIT_MS)
    plane.wait_secondary("live-a", "Training")
    row.get_by_role("button", name="Stop live-a").click()
    tab.page.wait_for_url("**/ui/jobs", timeout=_WAIT_MS)
    tab.page.locator(f"{_row('live-a')} .s-stopped").wait_for(timeout=_WAIT_MS)
    assert plane.describe("live-a")["TrainingJobStatus"] == "Stopped"


class _EvilSite(BaseHTTPRequestHandler):
    """Another site on the same host (same site for cookies, another origin) whose page posts
    the stop form to the server as soon as it loads."""

    target = ""

    def do_GET(self) -> None:
        page = (
            f'<form method="post" action="{self.target}/ui/jobs/-/stop">'
            '<input name="job" value="victim"><input name="csrf" value="guess"></form>'
            "<script>document.forms[0].submit()</script>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _evil_site(target: str) -> Iterator[str]:
    handler = type("Evil", (_EvilSite,), {"target": target})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_cross_site_post_does_not_stop_a_job(plane: ControlPlane, browser: Browser) -> None:
    plane.submit("victim", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("victim", "Training")
    with _evil_site(plane.server.url) as evil:
        tab = Tab(browser, plane.server.url, allow_4xx=True, also=evil)
        try:
            tab.sign_in(plane.server.ui_link())  # the victim is signed in
            with tab.page.expect_response(lambda r: r.request.method == "POST") as posted:
                tab.page.goto(evil)
            assert posted.value.status == 403
        finally:
            tab.close()
    assert plane.describe("victim")["TrainingJobStatus"] == "InProgress"
    plane.stop("victim")


def test_the_login_link_works_once(plane: ControlPlane, browser: Browser) -> None:
    link = plane.server.ui_link()
    first, second = (Tab(browser, plane.server.url, allow_4xx=True) for _ in range(2))
    try:
        first.sign_in(link)
        assert first.page.locator("h1").inner_text() == "Training jobs"
        second.page.goto(link)
        assert "used already or has expired" in second.page.locator("p.error").inner_text()
        second.page.goto(f"{plane.server.url}/ui/jobs")
        assert second.page.locator("h1").inner_text() == "Sign in"
        assert first.problems == []
        assert all("403" in problem for problem in second.problems)  # the spent link only
    finally:
        first.close()
        second.close()


def test_filtering_and_paging(settings: Settings, browser: Browser) -> None:
    names = finished_jobs(settings.home, 60)
    with control_plane(settings) as plane:
        tab = Tab(browser, plane.server.url)
        try:
            tab.sign_in(plane.server.ui_link())
            page = tab.page
            page.select_option("select[name=size]", "25")
            page.get_by_role("button", name="Filter").click()
            page.wait_for_url("**size=25**")
            assert page.locator("tr[data-job]").first.get_attribute("data-job") == names[-1]
            page.get_by_role("link", name="Next").click()
            page.wait_for_url("**after=**")
            shown = page.locator("tr[data-job]").evaluate_all(
                "rows => rows.map(r => r.dataset.job)"
            )
            assert shown == names[::-1][25:50]
            page.get_by_role("link", name="Clear").click()
            page.fill("input[name=name]", "old-0001")
            page.check("input[name=status][value=Completed]")
            page.get_by_role("button", name="Filter").click()
            page.wait_for_url("**name=old-0001**")
            shown = page.locator("tr[data-job]").evaluate_all(
                "rows => rows.map(r => r.dataset.job)"
            )
            assert shown == [f"old-{i:05d}" for i in range(19, 9, -1)]
            page.locator("th[data-order=name] a").click()  # sorted on the server, filters kept
            page.wait_for_url("**order=name**")
            shown = page.locator("tr[data-job]").evaluate_all(
                "rows => rows.map(r => r.dataset.job)"
            )
            assert shown == [f"old-{i:05d}" for i in range(10, 20)]
            page.locator("th[data-order=name] a").click()  # again: the other way round
            page.wait_for_url("**direction=desc**")
            shown = page.locator("tr[data-job]").evaluate_all(
                "rows => rows.map(r => r.dataset.job)"
            )
            assert shown == [f"old-{i:05d}" for i in range(19, 9, -1)]
            assert tab.problems == []
        finally:
            tab.close()


@pytest.mark.skipif(
    not os.environ.get("TRAINOPS_UI_SCREENSHOTS"),
    reason="writes docs/images/ui-jobs.png only when asked: TRAINOPS_UI_SCREENSHOTS=1",
)
def test_screenshot_of_the_jobs_page_for_the_docs(settings: Settings, browser: Browser) -> None:
    finished_jobs(settings.home, 12, prefix="resnet50-sweep")
    with control_plane(settings) as plane:
        plane.submit("bert-finetune-3", {"FAKE_LINES": "5"}, instance_type="ml.g5.2xlarge")
        plane.submit(
            "llama-lora-7", {"FAKE_FAIL_HOST": "algo-2", "FAKE_FAIL_REASON": "CUDA out of memory"},
            instance_type="ml.p4d.24xlarge", instance_count=2,
        )  # fmt: skip
        plane.wait_ended("bert-finetune-3")
        plane.wait_ended("llama-lora-7")
        plane.submit("vit-pretrain-1", {"FAKE_HANG_ATTEMPTS": "1"}, instance_type="ml.g5.12xlarge")
        plane.wait_secondary("vit-pretrain-1", "Training")
        tab = Tab(browser, plane.server.url)
        try:
            tab.sign_in(plane.server.ui_link())
            tab.page.goto(f"{plane.server.url}/ui/jobs?size=25")
            tab.page.screenshot(path=str(DOCS_IMAGES / "ui-jobs.png"))
            assert tab.problems == []
        finally:
            tab.close()
        plane.stop("vit-pretrain-1")
