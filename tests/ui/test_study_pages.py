"""The studies list and a study's page, over real HTTP against a real control plane with a study
recorded through the API (``POST /api/v1/studies``, as ``trainops study`` records one) whose
title and labels hold markup and script: what each page shows, that the text is escaped, that
the page follows a study while it runs and stops once it has ended."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.control._harness import ControlPlane
from tests.ui._browser import Tab
from tests.ui._jobs import HOSTILE
from tests.ui.test_ui_browser import DOCS_IMAGES

if TYPE_CHECKING:
    from playwright.sync_api import Browser

_ROW = {"instance_type": "ml.m5.large", "processes_per_host": 1, "status": "Completed"}


def _record(plane: ControlPlane, status: str, rows: list[dict[str, Any]]) -> None:
    study = {"name": "scaling-1", "title": f"train.py {HOSTILE}", "status": status,
             "target_metric": "acc", "rows": rows}  # fmt: skip
    answer = plane.client.post("/api/v1/studies", json=study)
    assert answer.status_code == 200, answer.text


def test_a_study_page_shows_the_apis_rows_and_plot_as_escaped_text(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    measured = [
        {**_ROW, "label": HOSTILE, "instance_count": 1, "job_name": "j-1", "throughput": 100.0,
         "efficiency": 1.0, "cost_usd": 0.5, "time_to_target_s": 12.0},
        {**_ROW, "label": "2 x ml.m5.large", "instance_count": 2, "job_name": "j-2",
         "throughput": 180.0, "efficiency": 0.9},
    ]  # fmt: skip
    pending = {**_ROW, "label": "4 x", "instance_count": 4, "status": "Pending"}
    _record(plane, "InProgress", [*measured, pending])
    html = browser_session.get("/ui/studies/scaling-1").text
    assert HOSTILE not in html and "&lt;script&gt;window.injected = 1&lt;/script&gt;" in html
    assert html.count('<tr data-row="') == 3 and "time to acc (s)" in html
    assert "<td>90%</td>" in html and "<td>0.5000</td>" in html and "<td>180</td>" in html
    assert html.count('<circle class="dot') == 2 and '<polyline class="ideal"' in html
    assert 'data-live="/ui/studies/scaling-1/-/body"' in html  # followed while it runs
    assert "charts.css" in html and "style=" not in html
    _record(plane, "Completed", measured)
    ended = browser_session.get("/ui/studies/scaling-1").text
    assert '<div id="study">' in ended and ended.count('<tr data-row="') == 2
    assert browser_session.get("/ui/studies/scaling-1/-/body").status_code == 200


def test_the_studies_list_links_each_and_an_unknown_study_is_a_404(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    assert "No studies yet." in browser_session.get("/ui/studies").text
    _record(plane, "InProgress", [])
    listed = browser_session.get("/ui/studies").text
    assert '<a href="/ui/studies/scaling-1">scaling-1</a>' in listed and HOSTILE not in listed
    assert '<a href="/ui/studies"' in listed  # in the navigation
    assert (
        "No configuration has a throughput yet."
        in browser_session.get("/ui/studies/scaling-1").text
    )
    missing = browser_session.get("/ui/studies/%3Cb%3Enope")
    assert missing.status_code == 404 and "no study named" in missing.text
    assert "<b>nope" not in missing.text


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("TRAINOPS_UI_SCREENSHOTS"),
    reason="writes docs/images/ui-study.png only when asked: TRAINOPS_UI_SCREENSHOTS=1",
)
def test_screenshot_of_a_study_page_for_the_docs(plane: ControlPlane, browser: Browser) -> None:
    rows = []
    for count, seconds, speed in ((1, 1840.0, 410.0), (2, 960.0, 790.0), (4, 520.0, 1460.0),
                                  (8, 300.0, 2530.0)):  # fmt: skip
        rows.append({
            "instance_type": "ml.g5.2xlarge", "processes_per_host": 1, "status": "Completed",
            "label": f"{count} x ml.g5.2xlarge", "instance_count": count,
            "job_name": f"resnet50-scaling-{count}", "throughput": speed,
            "efficiency": speed / (410.0 * count), "time_to_target_s": seconds,
            "cost_usd": round(seconds / 3600 * 1.212 * count, 4),
            "billable_seconds": seconds * count,
        })  # fmt: skip
    study = {"name": "resnet50-scaling", "title": "train.py on 1-8 x ml.g5.2xlarge",
             "status": "Completed", "target_metric": "val_acc", "rows": rows}  # fmt: skip
    assert plane.client.post("/api/v1/studies", json=study).status_code == 200
    tab = Tab(browser, plane.server.url)
    try:
        tab.sign_in(plane.server.ui_link())
        tab.page.set_viewport_size({"width": 1100, "height": 640})
        tab.page.goto(f"{plane.server.url}/ui/studies/resnet50-scaling")
        tab.page.screenshot(path=str(DOCS_IMAGES / "ui-study.png"), full_page=True)
    finally:
        tab.close()
    assert tab.problems == [], "\n".join(tab.problems)
