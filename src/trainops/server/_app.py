"""The FastAPI application: public API under ``/api/v1``, agent API under ``/agent/v1``.

Errors are JSON ``{"detail": {"error": kind, "message": text, ...}}`` (docs/api.md): trainops'
own exceptions are mapped here once, so the routes raise them freely.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from trainops._errors import JobNotFoundError, SpecError, TrainopsError
from trainops._settings import Settings
from trainops._version import __version__
from trainops.control import AgentAuthError, JobController, JobEndedError
from trainops.server._agent_api import agent_router
from trainops.server._http import ApiError
from trainops.server._public import public_router
from trainops.store import JobExistsError

__all__ = ["create_app"]

# Log long-polls hold a worker thread each; agents' reports must never wait behind them.
_WORKER_THREADS = 256

_KIND_BY_STATUS = {400: "bad_request", 401: "unauthorized", 404: "not_found", 409: "conflict"}


def create_app(controller: JobController, settings: Settings) -> FastAPI:
    """The ASGI app serving ``controller``; ``settings.token`` guards the public API."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = _WORKER_THREADS
        yield

    app = FastAPI(
        title="trainops",
        version=__version__,
        description="Training jobs with the SageMaker training contract.",
        lifespan=lifespan,
    )
    app.include_router(public_router(controller, settings), prefix="/api/v1")
    app.include_router(agent_router(controller), prefix="/agent/v1")
    _install_error_handlers(app)
    return app


def _error(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    detail = {"error": error, "message": message, **extra}
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
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

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()]
        return _error(400, "bad_request", "; ".join(problems) or "malformed request")

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        kind = _KIND_BY_STATUS.get(exc.status_code, "error")
        return _error(exc.status_code, kind, str(exc.detail))
