"""The job page in a real browser (Debian's Chromium through Playwright): a running job's new log
lines and metric points arrive without a reload, the page loads with no console error and no
failed request (the tab fixture fails the test otherwise), and (with
``TRAINOPS_UI_SCREENSHOTS=1``) the screenshot in docs/ui.md."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.control._harness import ControlPlane, control_plane
from tests.ui._browser import Tab
from trainops._settings import Settings

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.slow
_WAIT_MS = 30_000
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def test_new_log_lines_and_metric_points_arrive_live(plane: ControlPlane, tab: Tab) -> None:
    plane.submit("follow-me", {"FAKE_LINES": "1000", "FAKE_LINE_DELAY": "0.02"})
    plane.wait_secondary("follow-me", "Training")
    tab.page.goto(f"{plane.server.url}/ui/jobs/follow-me")
    log = tab.page.locator("#log td.line", has_text=re.compile(r"^algo-1 line 150$"))
    log.wait_for(timeout=_WAIT_MS)  # written after the page loaded: it came live
    caption = tab.page.locator("#metrics figcaption", has_text="loss")
    caption.wait_for(timeout=_WAIT_MS)
    first = caption.inner_text()
    tab.page.wait_for_function(
        "([text]) => ![...document.querySelectorAll('#metrics figcaption')]"
        ".some((c) => c.textContent === text)",
        arg=[first],
        timeout=_WAIT_MS,
    )  # the chart's caption (its point count) changed without a reload
    plane.stop("follow-me")


@pytest.mark.skipif(
    not os.environ.get("TRAINOPS_UI_SCREENSHOTS"),
    reason="writes docs/images/ui-job.png only when asked: TRAINOPS_UI_SCREENSHOTS=1",
)
def test_screenshot_of_the_job_page_for_the_docs(settings: Settings, browser: Browser) -> None:
    with control_plane(settings) as plane:
        plane.submit(
            "bert-finetune-3", {"FAKE_LINES": "60"}, instance_type="ml.g5.2xlarge",
            hyperparameters={"epochs": "3", "lr": "3e-5"},
        )  # fmt: skip
        plane.wait_ended("bert-finetune-3")
        tab = Tab(browser, plane.server.url)
        try:
            tab.sign_in(plane.server.ui_link())
            tab.page.set_viewport_size({"width": 1280, "height": 1400})
            tab.page.goto(f"{plane.server.url}/ui/jobs/bert-finetune-3")
            tab.page.screenshot(path=str(DOCS_IMAGES / "ui-job.png"))
            assert tab.problems == []
        finally:
            tab.close()
