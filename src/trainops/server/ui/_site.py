"""The web UI's routes on the API's app: ``/`` and ``/ui/...`` (login, static files, and each
registered page with its live parts and actions).

Every page answer has the strict headers of ``_layout``. A page or part needs a session (a page
without one sends the browser to the login page; a part answers 401, which ``ui.js`` shows); an
action (POST) also needs its request's Origin to be this server's and the session's CSRF token
in its form, so a page of another site cannot post one. Renderers run on the worker threads
(they read the store).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import parse_qsl

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from trainops.report import REPORT_CSP, render_html
from trainops.server._body import read_body
from trainops.server._http import error_answer
from trainops.server._routing import until_disconnect
from trainops.server.ui._artifacts import ARTIFACT_PATH, artifact_response
from trainops.server.ui._auth import Session, UiAuth, csrf_matches
from trainops.server.ui._layout import SECURITY_HEADERS, csrf_field, layout
from trainops.server.ui._page import PAGES, Page, PageRequest, UiContext, UiError, esc
from trainops.server.ui._static import static_file

__all__ = ["EVENTS_PATH", "UiSite"]

_MAX_FORM = 64 * 1024
_FORM = "application/x-www-form-urlencoded"
#: The profiler report's own page: its policy (no script, no style but its own by hash), framed
#: by no one, posting nowhere.
REPORT_PATH = "/ui/jobs/{job}/profiler-report"
REPORT_HEADERS = {
    **SECURITY_HEADERS,
    "Content-Security-Policy": f"{REPORT_CSP}; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
}
#: The change stream for the live pages (``GET /api/v1/events`` behind the session cookie).
EVENTS_PATH = "/ui/-/events"
Handler = Callable[[Request], Awaitable[Response]]


class UiSite:
    """The UI of one server: its auth (login links, sessions) and its routes."""

    def __init__(self, ui: UiContext, auth: UiAuth) -> None:
        self.ui = ui
        self.auth = auth
        self._store_path: Path = ui.settings.db_path

    def routes(self) -> list[Route]:
        routes = [
            Route("/", self._home, methods=["GET"]),
            Route("/ui", self._home, methods=["GET"]),
            Route("/ui/static/{name}", static_file, methods=["GET"]),
            Route("/ui/login", self._login, methods=["GET", "POST"]),
            Route("/ui/logout", self._logout, methods=["POST"]),
            Route(EVENTS_PATH, self._events, methods=["GET"]),
            Route(REPORT_PATH, self._report, methods=["GET"]),
            Route(ARTIFACT_PATH, self._artifact, methods=["GET"]),
        ]
        for name in PAGES:
            page = PAGES[name]
            routes += [
                Route(page.path, self._page_handler(name, page), methods=["GET"]),
                Route(f"{page.path}/-/{{part}}", self._part_handler(page), methods=["GET"]),
                Route(f"{page.path}/-/{{action}}", self._action_handler(page), methods=["POST"]),
            ]
        return routes

    # --- sign-in ------------------------------------------------------------------------------

    async def _home(self, _request: Request) -> Response:
        first = next((PAGES[n].path for n in PAGES if PAGES[n].nav), "/ui/login")
        return _redirect(first)

    async def _login(self, request: Request) -> Response:
        if request.method == "GET":
            code = request.query_params.get("code")
            if code is None:
                return _login_page("")
            session = self.auth.redeem(code)
            if session is None:
                return _login_page("This login link was used already or has expired.", 403)
            return self._signed_in(session)
        form = await _form(request)
        session = self.auth.sign_in(form.get("token", ""))
        if session is None:
            return _login_page("That is not this server's API token.", 403)
        return self._signed_in(session)

    async def _logout(self, request: Request) -> Response:
        session = self.auth.session(dict(request.cookies))
        form = await _form(request)
        if session is not None and csrf_matches(session, form.get("csrf", "")):
            self.auth.sign_out(session)
        response = _redirect("/ui/login")
        response.headers["Set-Cookie"] = self.auth.cookie_header(None)
        return response

    def _signed_in(self, session: Session) -> Response:
        response = _redirect("/")
        response.headers["Set-Cookie"] = self.auth.cookie_header(session)
        return response

    def _session(self, request: Request) -> tuple[Session | None, bool]:
        """The request's session, and whether it is new (a server without a token opens one)."""
        session = self.auth.session(dict(request.cookies))
        if session is None and self.auth.open:
            return self.auth.new_session(), True
        return session, False

    async def _report(self, request: Request) -> Response:
        """A job's profiler report as ``trainops report`` writes it (``GET
        /api/v1/jobs/{name}/profiler-report``'s data drawn by ``render_html``), under its own
        strict policy: the UI's would block its ``<style>``."""
        session, _new = self._session(request)
        if session is None:
            return _redirect("/ui/login")
        name = request.path_params["job"]
        try:
            data = await anyio.to_thread.run_sync(self.ui.reports.profiler_report, name)
        except Exception as exc:
            return self._failure(exc)
        return HTMLResponse(render_html(data), headers=dict(REPORT_HEADERS))

    async def _artifact(self, request: Request) -> Response:
        """A job's model or output archive as an attachment (``_artifacts``)."""
        session, _new = self._session(request)
        if session is None:
            return _redirect("/ui/login")
        job, artifact = request.path_params["job"], request.path_params["artifact"]
        try:
            return await artifact_response(self.ui, job, artifact)
        except Exception as exc:
            return self._failure(exc)

    async def _events(self, request: Request) -> Response:
        """``GET /api/v1/events``'s long-poll for a signed-in page (``ui.js`` follows it): the
        same handler, its answer as JSON; a page that is closed stops waiting at once."""
        if self.auth.session(dict(request.cookies)) is None:
            return _html("signed out", 401)
        try:
            found = await until_disconnect(request, self.ui.events.events_of(request.query_params))
        except Exception as exc:
            known = error_answer(exc, self._store_path)
            if known is None:
                raise
            return known
        if isinstance(found, Response):  # the page hung up: no one reads this
            return found
        return JSONResponse(found, headers=dict(SECURITY_HEADERS))

    # --- pages, parts, actions ----------------------------------------------------------------

    def _page_handler(self, name: str, page: Page) -> Handler:
        async def handler(request: Request) -> Response:
            session, new = self._session(request)
            if session is None:
                return _redirect("/ui/login")
            cursor = self.ui.events.feed.cursor()  # before reading: no change can slip by
            try:
                body = await anyio.to_thread.run_sync(page.render, self._request(request, session))
            except Exception as exc:
                return self._failure(exc)
            html = layout(
                page.title,
                body + _logout_form(session),
                current=name,
                scripts=page.scripts,
                styles=page.styles,
                events=(EVENTS_PATH, cursor),
            )
            response = _html(html)
            if new:
                response.headers["Set-Cookie"] = self.auth.cookie_header(session)
            return response

        return handler

    def _part_handler(self, page: Page) -> Handler:
        async def handler(request: Request) -> Response:
            session = self.auth.session(dict(request.cookies))  # the page set it, open or not
            if session is None:
                return _html("signed out", 401)
            part = request.path_params["part"]
            render, fingerprint = page.parts.get(part), page.tags.get(part)
            if render is None:
                return _html("no such part", 404)
            asked = self._request(request, session)
            try:
                wait = page.waits.get(part)
                if wait is not None:  # a long-poll: on the event loop, holding no thread
                    gone = await until_disconnect(request, wait(asked))
                    if isinstance(gone, Response):  # the tab hung up: its wait has ended
                        return gone
                if fingerprint is not None:  # cheap: a match is answered without rendering
                    tag = _etag(await anyio.to_thread.run_sync(fingerprint, asked))
                    if request.headers.get("if-none-match") == tag:
                        return Response(status_code=304, headers={**SECURITY_HEADERS, "ETag": tag})
                text = await anyio.to_thread.run_sync(render, asked)
            except Exception as exc:
                return self._failure(exc)
            if fingerprint is None:
                tag = _etag(text)
                if request.headers.get("if-none-match") == tag:
                    return Response(status_code=304, headers={**SECURITY_HEADERS, "ETag": tag})
            response = _html(text)
            response.headers["ETag"] = tag
            return response

        return handler

    def _action_handler(self, page: Page) -> Handler:
        async def handler(request: Request) -> Response:
            session = self.auth.session(dict(request.cookies))
            refused = _cross_site(request)
            if refused or session is None:
                return _error_page(refused or "sign in first", 403 if refused else 401)
            act = page.actions.get(request.path_params["action"])
            if act is None:
                return _error_page("no such action", 404)
            try:
                form = await _form(request)
                if not csrf_matches(session, form.get("csrf", "")):
                    return _error_page("the form's CSRF token is missing or wrong", 403)
                call = self._request(request, session, form)
                target = await anyio.to_thread.run_sync(act, call)
            except Exception as exc:
                return self._failure(exc)
            return _redirect(target if _local(target) else page.path)

        return handler

    def _request(
        self, request: Request, session: Session, form: dict[str, str] | None = None
    ) -> PageRequest:
        query = request.query_params
        return PageRequest(
            ui=self.ui,
            path=request.url.path,
            params={k: v for k, v in request.path_params.items() if k not in ("part", "action")},
            query=dict(query),
            query_lists={k: tuple(query.getlist(k)) for k in query},
            form=form or {},
            csrf=session.csrf,
        )

    def _failure(self, exc: Exception) -> Response:
        """An error a renderer or action raised, as a page saying it (the API's own mapping)."""
        if isinstance(exc, UiError):
            return _error_page(str(exc), exc.status)
        known = error_answer(exc, self._store_path)
        if known is None:
            raise exc
        message = json.loads(bytes(known.body))["detail"]["message"]
        return _error_page(str(message), known.status_code)


def _cross_site(request: Request) -> str:
    """Why a POST is refused as cross-site ("" when it is not): it must say where it comes from,
    and that must be here (the Host guard has checked an Origin against the Host already)."""
    if request.headers.get("origin") or request.headers.get("sec-fetch-site") == "same-origin":
        return ""
    return "a form must be posted from this server's own pages (no Origin header)"


async def _form(request: Request) -> dict[str, str]:
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != _FORM:
        raise UiError(f"a form must be sent as {_FORM}")
    body = await read_body(request, _MAX_FORM)
    try:
        pairs = parse_qsl(bytes(body).decode("utf-8"), max_num_fields=64, strict_parsing=False)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UiError(f"the form cannot be read: {exc}") from None
    return dict(pairs)


def _etag(text: str) -> str:
    return '"' + hashlib.sha256(text.encode()).hexdigest()[:20] + '"'


def _local(target: str) -> bool:
    return target.startswith("/") and not target.startswith("//") and "\\" not in target


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status, headers=dict(SECURITY_HEADERS))


def _redirect(target: str) -> Response:
    return RedirectResponse(target, 303, headers=dict(SECURITY_HEADERS))


def _error_page(message: str, status: int) -> Response:
    body = f'<h1>Error {status}</h1><p class="error">{esc(message)}</p><p><a href="/">Back</a></p>'
    return _html(layout(f"Error {status}", body), status)


def _logout_form(session: Session) -> str:
    return (
        f'<form class="logout" method="post" action="/ui/logout">{csrf_field(session.csrf)}'
        '<button type="submit">Sign out</button></form>'
    )


def _login_page(message: str, status: int = 200) -> Response:
    note = f'<p class="error">{esc(message)}</p>' if message else ""
    body = (
        f"<h1>Sign in</h1>{note}<p>Open the one-time link <code>trainops server</code> (or "
        "<code>trainops ui</code>) printed, or enter the server's API token "
        "(<code>$TRAINOPS_HOME/token</code>, or the configured one).</p>"
        '<form method="post" action="/ui/login"><label>API token '
        '<input type="password" name="token" autocomplete="current-password" required></label>'
        '<button type="submit">Sign in</button></form>'
    )
    return _html(layout("Sign in", body, signed_in=False), status)
