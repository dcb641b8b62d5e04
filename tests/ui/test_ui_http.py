"""The web UI over HTTP against a real server: sign-in (one-time links, the API token, the
cookie), the CSRF defence of actions, the headers, the static files and the jobs page's
filters, paging and escaping. (The browser tests drive the same pages in Chromium.)"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.control._harness import ControlPlane, control_plane
from tests.ui._jobs import HOSTILE, finished_jobs
from trainops._settings import Settings
from trainops.server.ui import CSP, PAGES


def _csrf(client: httpx.Client) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/ui/jobs").text)
    assert found is not None
    return found.group(1)


def test_the_login_link_works_once_and_sets_a_strict_cookie(
    plane: ControlPlane, visitor: httpx.Client
) -> None:
    assert visitor.get("/ui/jobs").headers["location"] == "/ui/login"
    link = plane.server.ui_link()
    first = visitor.get(link)
    assert first.status_code == 303 and first.headers["location"] == "/"
    cookie = first.headers["set-cookie"]
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
        assert attribute in cookie
    assert "Domain" not in cookie
    assert visitor.get("/ui/jobs").status_code == 200
    with httpx.Client(base_url=plane.server.url) as other:
        again = other.get(link)
        assert again.status_code == 403 and "used already" in again.text
        assert "set-cookie" not in again.headers
        assert other.get("/ui/jobs").status_code == 303


def test_the_api_token_signs_in_and_a_wrong_one_does_not(
    plane: ControlPlane, visitor: httpx.Client
) -> None:
    wrong = visitor.post("/ui/login", data={"token": "guess"})
    assert wrong.status_code == 403 and "set-cookie" not in wrong.headers
    right = visitor.post("/ui/login", data={"token": plane.server.token})
    assert right.status_code == 303
    assert visitor.get("/ui/jobs").status_code == 200
    assert plane.server.token not in visitor.get("/ui/jobs").text


def test_signing_out_ends_the_session(browser_session: httpx.Client) -> None:
    browser_session.post("/ui/logout", data={"csrf": _csrf(browser_session)})
    assert browser_session.get("/ui/jobs").status_code == 303
    assert browser_session.get("/ui/jobs/-/table").status_code == 401


def test_every_page_answer_has_the_strict_headers(browser_session: httpx.Client) -> None:
    for path in ("/ui/jobs", "/ui/login", "/ui/jobs/-/table", "/ui/jobs?size=7"):
        headers = browser_session.get(path).headers
        assert headers["content-security-policy"] == CSP
        assert headers["x-frame-options"] == "DENY"
        assert headers["cache-control"] == "no-store"
    assert "unsafe-inline" not in CSP


def test_stopping_a_job_needs_the_session_its_csrf_token_and_a_same_site_origin(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    plane.submit("victim", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("victim", "Training")
    csrf, origin = _csrf(browser_session), plane.server.url
    form = {"job": "victim", "csrf": csrf}
    refused = [
        browser_session.post("/ui/jobs/-/stop", data=form),  # no Origin
        browser_session.post("/ui/jobs/-/stop", data=form, headers={"Origin": "http://evil.test"}),
        browser_session.post(
            "/ui/jobs/-/stop", data={"job": "victim", "csrf": "x"}, headers={"Origin": origin}
        ),
        browser_session.post("/ui/jobs/-/stop", data={"job": "victim"}, headers={"Origin": origin}),
        httpx.post(f"{origin}/ui/jobs/-/stop", data=form, headers={"Origin": origin}),  # no cookie
    ]
    assert [r.status_code for r in refused] == [403, 403, 403, 403, 401]
    assert plane.describe("victim")["TrainingJobStatus"] == "InProgress"
    stopped = browser_session.post("/ui/jobs/-/stop", data=form, headers={"Origin": origin})
    assert stopped.status_code == 303 and stopped.headers["location"] == "/ui/jobs"
    assert plane.wait_ended("victim")["TrainingJobStatus"] == "Stopped"
    again = browser_session.post("/ui/jobs/-/stop", data=form, headers={"Origin": origin})
    assert again.status_code == 409 and "already ended" in again.text


def test_a_failure_reason_with_markup_is_shown_as_text(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    plane.submit("hostile", {"FAKE_FAIL_HOST": "algo-1", "FAKE_FAIL_REASON": HOSTILE})
    plane.wait_ended("hostile")
    page = browser_session.get("/ui/jobs").text
    assert "<script>window.injected" not in page and '<i id="injected">' not in page
    assert "&lt;script&gt;window.injected = 1&lt;/script&gt;" in page


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("status=Bogus", "status 'Bogus' is not one of"),
        ("size=7", "size must be one of"),
        ("after=yesterday", "after: 'yesterday' is not a cursor this server gave"),
        ("order=cost", "order 'cost' is not one of created, name, status"),
        ("order=name&direction=up", "direction must be one of desc, asc"),
        ("status=%3Cb%3E", "status '&lt;b&gt;'"),
    ],
)
def test_a_bad_query_is_one_line_saying_what(
    browser_session: httpx.Client, query: str, problem: str
) -> None:
    answer = browser_session.get(f"/ui/jobs?{query}")
    assert answer.status_code == 400
    assert problem.replace("'", "&#x27;") in answer.text


def test_static_files_are_ours_only(visitor: httpx.Client) -> None:
    script = visitor.get("/ui/static/ui.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )
    for name in ("..%2F_site.py", "_site.py", "missing.js", "UI.JS", ".hidden.css"):
        assert visitor.get(f"/ui/static/{name}").status_code == 404


def test_forms_must_be_forms(plane: ControlPlane, browser_session: httpx.Client) -> None:
    origin = {"Origin": plane.server.url}
    as_json = browser_session.post("/ui/jobs/-/stop", json={"job": "x"}, headers=origin)
    assert as_json.status_code == 400 and "x-www-form-urlencoded" in as_json.text
    big = browser_session.post(
        "/ui/jobs/-/stop", content=b"a=" + b"x" * 100_000, headers={**origin,
        "Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert big.status_code == 413


def test_the_jobs_page_filters_and_pages_on_the_server(settings: Settings) -> None:
    names = finished_jobs(settings.home, 130)
    with control_plane(settings) as plane, httpx.Client(base_url=plane.server.url) as client:
        client.get(plane.server.ui_link())
        first = client.get("/ui/jobs?size=50").text
        shown = re.findall(r'<tr data-job="([^"]+)"', first)
        assert "so far" not in first  # finished jobs have a duration, not a running clock
        assert shown == names[::-1][:50]
        older = re.search(r'rel="next" href="([^"]+)"', first)
        assert older is not None
        second = client.get(older.group(1).replace("&amp;", "&")).text
        assert re.findall(r'<tr data-job="([^"]+)"', second) == names[::-1][50:100]
        filtered = client.get("/ui/jobs?name=00012&status=Completed").text
        assert re.findall(r'<tr data-job="([^"]+)"', filtered) == ["old-00012"]
        assert "No jobs match." in client.get("/ui/jobs?status=Failed").text
        assert 'rel="next"' not in client.get("/ui/jobs?size=200").text


def test_the_root_leads_to_the_first_page_of_the_nav(visitor: httpx.Client) -> None:
    first = next(PAGES[n].path for n in PAGES if PAGES[n].nav)
    assert visitor.get("/").headers["location"] == first
