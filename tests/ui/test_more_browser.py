"""The tuning job's page in a real browser (Debian's Chromium through Playwright): its trials,
counts and charts arrive live while the tuning job runs, with no reload; and (with
``TRAINOPS_UI_SCREENSHOTS=1``) the screenshots of the tuning and cluster pages in docs/ui.md.
Every tab fails its test on a console error, a failed request or a request elsewhere."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from tests.control._harness import ControlPlane, control_plane
from tests.tuner.test_service import create, tuning_config, wait_tuning
from tests.ui._browser import Tab
from tests.ui.test_ui_browser import DOCS_IMAGES
from trainops._settings import Settings

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.slow
_WAIT_MS = 60_000


def test_trials_and_counts_arrive_live_on_the_tuning_page(plane: ControlPlane, tab: Tab) -> None:
    create(plane, tuning_config("live", jobs=3, parallel=1, FAKE_LINES="20"))
    tab.page.goto(f"{plane.server.url}/ui/tuning/live")
    page = tab.page
    assert page.locator('[data-count="Completed"]').inner_text() == "0"
    # No reload from here on: the live part brings each trial, its objective and the counts.
    page.locator('tr[data-trial="2"]').wait_for(timeout=_WAIT_MS)
    page.locator('[data-count="Completed"]:text-is("3")').wait_for(timeout=_WAIT_MS)
    assert page.locator("#objective circle.dot").count() == 3
    assert page.locator("#slices figure.slice").count() == 2
    assert page.locator("#tuning").get_attribute("data-refreshed") is not None
    assert wait_tuning(plane, "live", "Completed")["HyperParameterTuningJobStatus"] == "Completed"


@pytest.mark.skipif(
    not os.environ.get("TRAINOPS_UI_SCREENSHOTS"),
    reason="writes docs/images/ui-tuning.png and ui-cluster.png only when asked",
)
def test_screenshots_of_the_tuning_and_cluster_pages_for_the_docs(
    settings: Settings, browser: Browser
) -> None:
    with control_plane(settings) as plane:
        create(
            plane,
            tuning_config("lr-sweep", jobs=12, parallel=2, FAKE_LINES="4", FAKE_LOSS_BY_LR="1"),
        )
        wait_tuning(plane, "lr-sweep", "Completed")
        plane.submit("bert-finetune-3", {"FAKE_HANG_ATTEMPTS": "1"}, instance_count=2)
        plane.wait_secondary("bert-finetune-3", "Training")
        tab = Tab(browser, plane.server.url)
        try:
            tab.sign_in(plane.server.ui_link())
            tab.page.set_viewport_size({"width": 1100, "height": 1600})
            tab.page.goto(f"{plane.server.url}/ui/tuning/lr-sweep")
            tab.page.screenshot(path=str(DOCS_IMAGES / "ui-tuning.png"), full_page=True)
            tab.page.set_viewport_size({"width": 1100, "height": 420})
            tab.page.goto(f"{plane.server.url}/ui/cluster")
            tab.page.screenshot(path=str(DOCS_IMAGES / "ui-cluster.png"))
            assert tab.problems == []
        finally:
            tab.close()
        plane.stop("bert-finetune-3")
        plane.wait_ended("bert-finetune-3")
