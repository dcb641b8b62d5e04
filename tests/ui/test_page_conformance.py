"""Every registered page of the web UI (``trainops.server.ui.PAGES``), loaded in the tests'
browser against a real server whose job holds markup and script in its failure reason and
hyperparameters: it loads with no console error (a Content-Security-Policy violation is one),
no failed request and no request outside the server, and none of the job's text became an
element or ran. Parametrized over the registry at collection: a registered page is tested
without touching this file (docs/internals/ui-pages.md)."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from tests.control._harness import ControlPlane
from tests.ui._browser import Tab
from tests.ui._jobs import HOSTILE, hostile_tuning
from trainops.server.ui import PAGES

pytestmark = pytest.mark.slow
_JOB = "hostile"
_TUNING = "hostile-tuning"
# What fills a page path's parameters; {job} is the hostile job's name, {tuning} the hostile
# tuning job's (made for the tuning pages only: it runs trials), {study} a study recorded
# through the API (for the study pages only).
_STUDY = "hostile-study"
_SAMPLES = {"job": _JOB, "tuning": _TUNING, "study": _STUDY}


def _hostile_study(plane: ControlPlane) -> None:
    """A running study, as ``trainops study`` records one, whose title and label hold markup."""
    row = {"label": HOSTILE, "instance_type": "ml.m5.large", "instance_count": 1,
           "processes_per_host": 1, "job_name": _JOB, "status": "Completed",
           "throughput": 10.0, "efficiency": 1.0}  # fmt: skip
    study = {"name": _STUDY, "title": HOSTILE, "status": "InProgress", "rows": [row]}
    assert plane.client.post("/api/v1/studies", json=study).status_code == 200


def _url(path: str) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in _SAMPLES:
            pytest.fail(f"no sample value for the page parameter {{{name}}}: add it to _SAMPLES")
        return quote(_SAMPLES[name], safe="")

    return re.sub(r"{([^}]+)}", fill, path)


@pytest.mark.parametrize("name", PAGES.names())
def test_the_page_loads_cleanly_and_shows_the_jobs_text_as_text(
    name: str, plane: ControlPlane, tab: Tab
) -> None:
    env = {"FAKE_FAIL_HOST": "algo-1", "FAKE_FAIL_REASON": HOSTILE}
    plane.submit(_JOB, env, hyperparameters={"note": HOSTILE})
    plane.wait_ended(_JOB)
    if PAGES[name].path.startswith("/ui/tuning"):
        hostile_tuning(plane, _TUNING, jobs=2)
    if PAGES[name].path.startswith("/ui/studies"):
        _hostile_study(plane)
    tab.page.goto(plane.server.url + _url(PAGES[name].path))
    # "load", not "networkidle": a live page always has its change stream's long-poll open.
    tab.page.wait_for_load_state("load")
    assert tab.page.locator("main").count() == 1
    assert tab.page.locator("#injected").count() == 0
    assert tab.page.evaluate("window.injected") is None
    if "window.injected = 1" in tab.page.content():  # wherever the page has the text, as text
        assert "<script>window.injected = 1</script>" in tab.page.locator("main").inner_text()
    if name == "jobs":
        assert tab.page.locator(f'tr[data-job="{_JOB}"] .reason').inner_text().startswith("<i id")
