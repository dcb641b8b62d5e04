"""The FastAPI application: public API under ``/api/v1``, agent API under ``/agent/v1``.

Errors are JSON ``{"detail": {"error": kind, "message": text, ...}}`` (docs/api.md): trainops'
own exceptions are mapped here once, so the routes raise them freely.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from trainops._errors import JobNotFoundError, SpecError, TrainopsError
from trainops._settings import Settings
from trainops._version import __version__
from trainops.control import AgentAuthError, JobController, JobEndedError
from trainops.server._agent_api import agent_router
from trainops.server._guard import HostGuard, allowed_host_names
from trainops.server._http import ApiError
from trainops.server._longpoll import LogWaiter
from trainops.server._public import _WHY, errors, public_router
from trainops.store import JobExistsError

__all__ = ["create_app"]

# Sync routes (agents' reports among them) run on this pool; log long-polls never take a
# thread from it while they wait (they are async, see _longpoll.py).
_WORKER_THREADS = 64

_KIND_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
}


def create_app(
    controller: JobController, settings: Settings, *, bind_host: str = "127.0.0.1"
) -> FastAPI:
    """The ASGI app serving ``controller``; ``settings.token`` guards the public API.

    Requests whose Host is not a name of a server bound to ``bind_host`` (or one of
    ``settings.allowed_hosts``), or whose Origin is another site, are refused (403).
    """

    waiter = LogWaiter(controller)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = _WORKER_THREADS
        await waiter.start()
        try:
            yield
        finally:
            waiter.stop()

    app = FastAPI(
        title="trainops",
        version=__version__,
        description="Training jobs with the SageMaker training contract.",
        lifespan=lifespan,
    )
    app.include_router(public_router(controller, settings, waiter), prefix="/api/v1")
    app.include_router(
        agent_router(controller), prefix="/agent/v1", responses=errors(400, 401, 403, 409)
    )
    _install_error_handlers(app, settings.db_path)
    _document_errors_truly(app)
    app.add_middleware(HostGuard, allowed=allowed_host_names(bind_host, settings.allowed_hosts))
    return app


def _document_errors_truly(app: FastAPI) -> None:
    """Drop the 422 FastAPI declares on every route: invalid requests are answered 400 here.

    Only ``POST /jobs`` answers 422 (an invalid spec), and it declares that itself.
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            store_errors = _store_error_responses()
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    answer = operation.get("responses", {}).get("422", {})
                    if "HTTPValidationError" in json.dumps(answer):
                        del operation["responses"]["422"]
                    # Any route that reads or writes the store may answer these two.
                    operation.setdefault("responses", {}).update(store_errors)
            for unused in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(unused, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _store_error_responses() -> dict[str, Any]:
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    return {str(status): {"description": _WHY[status], "content": body} for status in (503, 507)}


def _error(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    detail = {"error": error, "message": message, **extra}
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI, store_path: Path) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.error, exc.message, **exc.extra)

    @app.exception_handler(TrainopsError)
    async def trainops_error(_request: Request, exc: TrainopsError) -> JSONResponse:
        if isinstance(exc, SpecError):
            problems = [[path, reason] for path, reason in exc.problems]
            return _error(422, "invalid_spec", str(exc), problems=problems)
        if isinstance(exc, JobNotFoundError):
            return _error(404, "not_found", str(exc))
        if isinstance(exc, JobExistsError | JobEndedError):
            return _error(409, "conflict", str(exc))
        if isinstance(exc, AgentAuthError):
            return _error(401, "unauthorized", str(exc))
        return _error(400, "bad_request", str(exc))

    @app.exception_handler(sqlite3.OperationalError)
    async def store_error(_request: Request, exc: sqlite3.OperationalError) -> JSONResponse:
        # Typically "database or disk is full": say so in one line, never a traceback.
        message = f"the metadata store {store_path} cannot be written: {exc}"
        if "full" in str(exc):
            return _error(507, "insufficient_storage", message + "; free some space there")
        return _error(503, "store_unavailable", message)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()]
        return _error(400, "bad_request", "; ".join(problems) or "malformed request")

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        kind = _KIND_BY_STATUS.get(exc.status_code, "error")
        return _error(exc.status_code, kind, str(exc.detail))
