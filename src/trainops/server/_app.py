"""The ASGI application (Starlette): public API under ``/api/v1``, agent API under ``/agent/v1``,
AWS's own protocols (SageMaker's JSON 1.1 API, SigV4-signed) and the web UI (``/`` and ``/ui``,
``ui/``) on the same port (``aws/``).

The routes come from one table (``_routing.Operation`` declarations in the ``routes`` package
and ``_agent_api.py``), which parses the requests and writes the OpenAPI document served at
``/openapi.json`` (built on its first request, not at start-up). Errors are JSON
``{"detail": {"error": kind, "message": text, ...}}`` (docs/api.md), the router's own 404 and
405 included.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Match, Route

from trainops._settings import Settings
from trainops._version import __version__
from trainops.control import JobController
from trainops.server._agent_api import agent_operations
from trainops.server._events import ChangeFeed
from trainops.server._guard import HostGuard, allowed_host_names
from trainops.server._http import KIND_BY_STATUS, error
from trainops.server._longpoll import LogWaiter
from trainops.server._routing import Operation, starlette_routes
from trainops.server.aws import AWS_SERVICES, AwsWire, Verifier, derive_credentials
from trainops.server.routes import public_operations
from trainops.server.ui import UiAuth, UiContext, UiSite

__all__ = ["create_app"]

# Sync routes (agents' reports among them) run on this pool; log long-polls never take a
# thread from it while they wait (they are async, see _longpoll.py).
_WORKER_THREADS = 64

TITLE = "trainops"
DESCRIPTION = "Training jobs with the SageMaker training contract."
OPENAPI_URL = "/openapi.json"


def create_app(
    controller: JobController, settings: Settings, *, bind_host: str = "127.0.0.1"
) -> Starlette:
    """The ASGI app serving ``controller``; ``settings.token`` guards the public API.

    Requests whose Host is not a name of a server bound to ``bind_host`` (or one of
    ``settings.server.allowed_hosts``), or whose Origin is another site, are refused (403).
    The web UI's :class:`~trainops.server.ui.UiSite` is ``app.state.ui`` (its login links).
    """

    waiter = LogWaiter(controller)
    feed = ChangeFeed(controller.store.commits)
    operations = [
        *public_operations(controller, settings, waiter, feed),
        *agent_operations(controller),
    ]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = _WORKER_THREADS
        await waiter.start()
        await feed.start()
        try:
            yield
        finally:
            feed.stop()
            waiter.stop()

    ui = UiSite(UiContext.build(controller, settings, waiter, feed), UiAuth(settings.token))
    routes = [
        *starlette_routes(operations, token=settings.token, store_path=settings.db_path),
        *_document_routes(operations),
        *ui.routes(),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                HostGuard, allowed=allowed_host_names(bind_host, settings.server.allowed_hosts)
            ),
            Middleware(
                AwsWire,
                services=lambda: [make(controller, settings) for make in AWS_SERVICES.values()],
                verifier=Verifier(
                    derive_credentials(settings.token) if settings.token else None,
                    settings.region,
                ),
            ),
        ],
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.ui = ui
    app.state.feed = feed
    return app


def _document_routes(operations: list[Operation]) -> list[Route]:
    """``/openapi.json`` (written on its first request, then kept), ``/docs`` and ``/redoc``."""
    written: list[bytes] = []

    def write() -> bytes:
        from trainops.server._openapi import openapi_document

        document = openapi_document(
            operations, title=TITLE, version=__version__, description=DESCRIPTION
        )
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()

    async def openapi(_request: Request) -> Response:
        if not written:
            written.append(await anyio.to_thread.run_sync(write))
        return Response(written[0], media_type="application/json")

    async def docs(_request: Request) -> Response:
        from trainops.server._openapi import swagger_page

        return HTMLResponse(swagger_page(TITLE, OPENAPI_URL))

    async def redoc(_request: Request) -> Response:
        from trainops.server._openapi import redoc_page

        return HTMLResponse(redoc_page(TITLE, OPENAPI_URL))

    return [Route(OPENAPI_URL, openapi), Route("/docs", docs), Route("/redoc", redoc)]


async def _http_error(request: Request, exc: Exception) -> Response:
    """The router's own answers (404 no such route, 405 another method) in the error shape."""
    assert isinstance(exc, HTTPException)
    headers = exc.headers
    if exc.status_code == 405:  # Starlette names only the methods of the first route it found
        headers = {"Allow": _allowed_methods(request)}
    kind = KIND_BY_STATUS.get(exc.status_code, "error")
    return error(exc.status_code, kind, str(exc.detail), headers=headers)


def _allowed_methods(request: Request) -> str:
    routes = request.app.router.routes
    methods: set[str] = set()
    for route in routes:
        if (
            isinstance(route, Route)
            and route.methods
            and route.matches(request.scope)[0] != Match.NONE
        ):
            methods |= route.methods
    return ", ".join(sorted(methods))
