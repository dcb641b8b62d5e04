"""The page seam itself: the public names, what a page may be, the auth's links and sessions,
and that registering a page is all it takes to serve it (with its live part and its action,
behind the same sign-in and CSRF checks)."""

from __future__ import annotations

import re

import httpx
import pytest

import trainops.server.ui as ui
from tests.control._harness import control_plane
from trainops._settings import Settings
from trainops.server.ui import PAGES, Page, PageRequest, UiAuth, UiError, csrf_field, esc


def test_every_public_name_resolves() -> None:
    assert sorted(ui.__all__) == sorted(set(ui.__all__))
    for name in ui.__all__:
        assert getattr(ui, name) is not None


@pytest.mark.parametrize(
    "path", ["/jobs", "/ui/", "/ui/a/-/b", "/ui/x/", "ui/x"], ids=lambda p: repr(p)
)
def test_a_page_path_is_under_ui_without_the_part_separator(path: str) -> None:
    with pytest.raises(ValueError, match="page path"):
        Page(path, "t", lambda request: "")


def test_a_page_with_parameters_is_not_in_the_nav() -> None:
    with pytest.raises(ValueError, match="not in the nav"):
        Page("/ui/x/{job}", "t", lambda request: "", nav=True)


def test_an_unknown_page_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(UiError, match=r"unknown web UI page 'nope' \(known: jobs"):
        PAGES.lookup("nope")


def test_esc_escapes_markup_and_quotes() -> None:
    assert esc('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert esc(None) == "" and esc(3) == "3"
    assert csrf_field('"><x') == '<input type="hidden" name="csrf" value="&quot;&gt;&lt;x">'


def test_a_login_link_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = UiAuth("token")
    monkeypatch.setattr("trainops.server.ui._auth.LINK_TTL_S", -1.0)
    code = auth.login_link("http://127.0.0.1:1").rsplit("=", 1)[1]
    assert auth.redeem(code) is None
    assert auth.sign_in("wrong") is None and auth.sign_in("token") is not None


def test_sessions_are_told_apart_by_key_and_server() -> None:
    auth, other = UiAuth("token"), UiAuth("another token")
    session = auth.new_session()
    assert auth.session({auth.cookie: session.key}) == session
    assert auth.session({auth.cookie: session.key[:-1] + "x"}) is None
    assert other.cookie != auth.cookie and other.session({other.cookie: session.key}) is None
    auth.sign_out(session)
    assert auth.session({auth.cookie: session.key}) is None


def _echo(request: PageRequest) -> str:
    return f"<p id=echo>{esc(request.query.get('say'))}</p><div data-live=/ui/echo/-/count></div>"


def test_registering_a_page_is_enough_to_serve_it(settings: Settings) -> None:
    done: list[str] = []

    def record(request: PageRequest) -> str:
        done.append(request.form["what"])
        return "/ui/echo?say=done"

    page = Page(
        "/ui/echo", "Echo", _echo, nav=True,
        parts={"count": lambda request: str(len(done))}, actions={"record": record},
    )  # fmt: skip
    with (
        PAGES.added("echo", page),
        control_plane(settings) as plane,
        httpx.Client(base_url=plane.server.url) as browser,
    ):
        browser.get(plane.server.ui_link())
        shown = browser.get("/ui/echo?say=<b>hi</b>").text
        assert "<p id=echo>&lt;b&gt;hi&lt;/b&gt;</p>" in shown
        assert '<a href="/ui/echo" aria-current="page">Echo</a>' in shown
        assert browser.get("/ui/echo/-/count").text == "0"
        found = re.search(r'name="csrf" value="([^"]+)"', shown)
        assert found is not None
        origin = {"Origin": plane.server.url}
        refused = browser.post("/ui/echo/-/record", data={"what": "x"}, headers=origin)
        assert refused.status_code == 403 and done == []
        posted = browser.post(
            "/ui/echo/-/record", data={"what": "x", "csrf": found.group(1)}, headers=origin
        )
        assert posted.headers["location"] == "/ui/echo?say=done" and done == ["x"]
        assert browser.get("/ui/echo/-/count").text == "1"
        assert browser.get("/ui/echo/-/nothing").status_code == 404
