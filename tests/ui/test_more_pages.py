"""The tuning jobs list, a tuning job's page and the cluster page, over real HTTP against a real
control plane running a real (small) tuning job whose categorical values hold markup and script:
what each page shows, that the text is escaped, that the data is the API's own, and that the
stop button stops the tuning job only with the session's CSRF token."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.control._harness import ControlPlane, control_plane
from tests.tuner.test_service import create, tuning_config, wait_tuning
from tests.ui._jobs import HOSTILE, hostile_tuning
from trainops._settings import Settings
from trainops.store import MetadataStore, TuningTrialRecord

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def test_the_tuning_page_shows_the_apis_trials_charts_and_counts_as_escaped_text(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    described = hostile_tuning(plane)
    analysis = plane.client.get("/api/v1/tuning-jobs/tiny/analysis").json()
    page = browser_session.get("/ui/tuning/tiny")
    assert page.status_code == 200, page.text
    html = page.text
    assert HOSTILE not in html and "<script>window.injected" not in html
    assert "&lt;script&gt;window.injected = 1&lt;/script&gt;" in html
    assert html.count('<tr data-trial="') == len(analysis["trials"]) == 3
    best = described["BestTrainingJob"]["TrainingJobName"]
    first = re.search(r'<tr data-trial="\d+"><td data-key="1">1</td>.*?</tr>', html)
    assert first is not None and best in first.group(0)  # the leaderboard: best first
    counts = described["TrainingJobStatusCounters"]
    assert f'data-count="Completed">{counts["Completed"]}<' in html
    for figure in ("objective", "importance", "parallel", "slices"):
        assert f'id="{figure}"' in html
    assert html.count('<figure class="slice">') == 2  # lr and optimizer
    assert '<polyline class="best"' in html and 'class="pc-line' in html
    assert '<div id="tuning">' in html  # ended: nothing more to follow
    assert browser_session.get("/ui/tuning/tiny/-/body").status_code == 200
    assert "charts.css" in html and "style=" not in html


def test_the_tuning_jobs_list_links_each_and_filters_by_status(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    hostile_tuning(plane, jobs=1)
    listed = browser_session.get("/ui/tuning").text
    assert '<a href="/ui/tuning/tiny">tiny</a>' in listed
    assert '<a href="/ui/tuning"' in listed  # in the navigation
    none = browser_session.get("/ui/tuning", params={"status": "Failed"}).text
    assert "No tuning jobs match." in none and "/ui/tuning/tiny" not in none
    bad = browser_session.get("/ui/tuning", params={"status": "<b>x</b>"})
    assert bad.status_code == 400 and "&lt;b&gt;x&lt;/b&gt;" in bad.text
    assert browser_session.get("/ui/tuning", params={"limit": "7"}).status_code == 400


def test_an_unknown_tuning_job_is_a_404_page(browser_session: httpx.Client) -> None:
    missing = browser_session.get("/ui/tuning/%3Cb%3Enope")
    assert missing.status_code == 404 and "no tuning job named" in missing.text
    assert "<b>nope" not in missing.text


@pytest.mark.slow
def test_the_stop_button_stops_a_running_tuning_job_only_with_the_csrf_token(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    config = tuning_config("slow", jobs=20, parallel=1, FAKE_LINES="200", FAKE_LINE_DELAY="0.1")
    create(plane, config)
    page = browser_session.get("/ui/tuning/slow").text
    assert 'class="live" data-live="/ui/tuning/slow/-/body" data-topics="tuning jobs"' in page
    token = _CSRF.search(page.split("Stop tuning job")[0].rsplit("<form", 1)[1])
    assert token is not None
    origin = {"Origin": plane.server.url}
    refused = browser_session.post(
        "/ui/tuning/slow/-/stop", data={"csrf": "forged"}, headers=origin
    )
    assert refused.status_code == 403
    assert (
        plane.client.get("/api/v1/tuning-jobs/slow").json()["HyperParameterTuningJobStatus"]
        == "InProgress"
    )
    done = browser_session.post(
        "/ui/tuning/slow/-/stop", data={"csrf": token.group(1)}, headers=origin
    )
    assert done.status_code == 303 and done.headers["location"] == "/ui/tuning/slow"
    wait_tuning(plane, "slow", "Stopped")


def test_the_cluster_page_shows_the_backends_nodes_and_what_runs_on_each(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    cluster = plane.client.get("/api/v1/cluster").json()
    plane.submit("busy", {"FAKE_LINES": "600", "FAKE_LINE_DELAY": "0.1"}, instance_count=2)
    plane.wait_secondary("busy", "Training")
    html = browser_session.get("/ui/cluster").text
    assert f'<code id="backend">{cluster["backend"]}</code>' in html
    for node in cluster["nodes"]:
        assert f'<tr data-node="{node["node"]}">' in html
        have = node["capacity"]["cpus"]
        assert '<td data-amount="cpus">' in html and f"/ {have}" in html
    running = re.search(r'<tr data-node="[^"]+">.*?</tr>', html)
    assert running is not None and running.group(0).count("busy") >= 2
    assert "algo-1" in running.group(0) and "algo-2" in running.group(0)
    plane.stop("busy")
    plane.wait_ended("busy")
    idle = browser_session.get("/ui/cluster/-/nodes").text
    assert "busy" not in idle and "<small>nothing</small>" in idle


def test_a_big_tuning_jobs_leaderboard_shows_the_best_hundred(settings: Settings) -> None:
    store = MetadataStore(settings.db_path)  # written before the server (and its tuner) starts
    try:
        store.create_tuning_job("big", tuning_config("big", jobs=120), "file:///c", 1.0)
        for i in range(120):
            trial = TuningTrialRecord("big", i, f"big-{i:03d}", {"lr": 0.01, "optimizer": "sgd"},
                                      "InProgress", 2.0 + i)  # fmt: skip
            store.add_trial(trial)
            store.update_trial("big", i, status="Completed", objective=float(i), end_time=3.0 + i)
        store.update_tuning_job("big", 200.0, status="Completed", end_time=200.0)
    finally:
        store.close()
    with control_plane(settings) as plane, httpx.Client(base_url=plane.server.url) as visitor:
        visitor.get(plane.server.ui_link())
        html = visitor.get("/ui/tuning/big").text
    assert html.count('<tr data-trial="') == 100
    assert '<tr data-trial="0">' in html and '<tr data-trial="100">' not in html  # Minimize
    assert "… 20 more trials" in html
    assert html.count('class="dot trial"') == 3 * 120  # the objective and two slices: all


@pytest.mark.parametrize("name", ["..%2F..%2Fjobs", "%2E%2E", "a%00b", "x" * 300])
def test_a_hostile_tuning_name_in_the_path_is_a_clean_error(
    browser_session: httpx.Client, name: str
) -> None:
    answer = browser_session.get(f"/ui/tuning/{name}")
    assert answer.status_code in (404, 400), answer.text
    assert "Traceback" not in answer.text  # a page's 404, or the app's for a path it lacks
