"""The profiler report under the UI (``/ui/jobs/{job}/profiler-report``): the report's own HTML
from the API's report data, under a strict policy of its own that allows exactly its ``<style>``
(by hash) and no script; linked from the job page; one clear error page without profiler data."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.control._harness import ControlPlane
from tests.report._synthetic import (
    Profile,
    step_rows,
    steps_dir,
    system_dir,
    system_rows,
    write_meta,
    write_series,
)
from tests.ui._browser import Tab
from trainops.report import REPORT_CSP

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def _profiled(plane: ControlPlane, name: str) -> None:
    """A finished job with a little profiler data in its profiler prefix (as SeriesWriter
    writes it)."""
    plane.submit(name, {"FAKE_LINES": "1"})
    plane.wait_ended(name)
    output = plane.describe(name)["OutputDataConfig"]["S3OutputPath"]
    profile = Profile(Path(output.removeprefix("file://")) / name / "profiler-output")
    write_meta(profile)
    write_series(profile, system_dir("algo-1"), *system_rows(60, 2, lambda i, c: 50.0, start=0.0))
    write_series(profile, steps_dir("algo-1", 0), *step_rows(20, start=1.0))


def _style_hashes(page: str) -> list[str]:
    styles = re.findall(r"<style>(.*?)</style>", page, flags=re.S)
    return [base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in styles]


def test_the_report_is_served_under_its_own_strict_policy(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    _profiled(plane, "profiled")
    job_page = browser_session.get("/ui/jobs/profiled").text
    assert 'href="/ui/jobs/profiled/profiler-report"' in job_page
    answer = browser_session.get("/ui/jobs/profiled/profiler-report")
    assert answer.status_code == 200, answer.text
    page = answer.text
    assert "<h1>Profiler report: profiled</h1>" in page and "<script" not in page
    policy = answer.headers["content-security-policy"]
    assert policy.startswith(REPORT_CSP) and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "script-src" not in policy  # default-src 'none'
    hashes = _style_hashes(page)
    assert hashes and all(f"'sha256-{h}'" in policy for h in hashes)  # exactly its style
    assert f'content="{REPORT_CSP}"' in page  # the file's own policy says the same
    assert answer.headers["x-frame-options"] == "DENY"


def test_without_profiler_data_or_session_it_answers_plainly(
    plane: ControlPlane, visitor: httpx.Client, browser_session: httpx.Client
) -> None:
    plane.submit("plain", {"FAKE_LINES": "1"})
    plane.wait_ended("plain")
    assert "Profiler report</a>" not in browser_session.get("/ui/jobs/plain").text
    bare = browser_session.get("/ui/jobs/plain/profiler-report")
    assert bare.status_code == 404 and "has no profiler data" in bare.text
    assert "default-src 'self'" in bare.headers["content-security-policy"]  # the UI's page
    unknown = browser_session.get("/ui/jobs/%3Cb%3Enope/profiler-report")
    assert unknown.status_code == 404 and "<b>nope" not in unknown.text
    visitor.cookies.clear()
    assert visitor.get("/ui/jobs/plain/profiler-report").headers["location"] == "/ui/login"


@pytest.mark.slow
def test_the_report_renders_styled_with_no_csp_violation(
    plane: ControlPlane, browser: Browser
) -> None:
    _profiled(plane, "shown")
    tab = Tab(browser, plane.server.url)
    try:
        tab.sign_in(plane.server.ui_link())
        tab.page.goto(f"{plane.server.url}/ui/jobs/shown")
        tab.page.click("a.report")
        tab.page.wait_for_selector("h1")
        assert tab.page.title() == "Profiler report: shown"
        background = tab.page.eval_on_selector("body", "b => getComputedStyle(b).backgroundColor")
        assert background == "rgb(245, 247, 250)"  # its <style> applied (#f5f7fa)
    finally:
        tab.close()
    assert tab.problems == [], "\n".join(tab.problems)
