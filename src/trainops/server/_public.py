"""The public API (``/api/v1``): health, info, names, submit, list, describe, stop, logs, metrics.

Every error answer a route can give is declared in its OpenAPI ``responses`` (``errors(...)``),
so the served document stays true; a schemathesis run in the tests keeps it so.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from trainops._settings import Settings
from trainops._version import __version__
from trainops.backends import Capacity
from trainops.control import JobController, PrimaryStatus
from trainops.server._http import ApiError, bearer_token, token_matches
from trainops.server._longpoll import LogWaiter
from trainops.server._views import describe, log_page, metric_points, summary
from trainops.spec import JobNamer, JobSpec
from trainops.store import JobRecord

__all__ = ["ErrorBody", "SubmitRequest", "errors", "public_router"]


_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="the server's API token: TRAINOPS_TOKEN, else the one in $TRAINOPS_HOME/token",
)


class SubmitRequest(BaseModel):
    """A job to run: its name, its spec (``JobSpec`` as JSON) and the uploaded code."""

    job_name: str
    spec: dict[str, Any] = Field(
        description="the job spec (docs/job-spec.md); anything else is a 422 naming the field",
        json_schema_extra={"required": ["entry_point"]},
    )
    code_uri: str = Field(description="URI of the packed source directory (sourcedir.tar.gz)")


class NameRequest(BaseModel):
    """Ask for a fresh job name made from a base name (``POST /job-names``)."""

    base_job_name: str


class ErrorDetail(BaseModel):
    error: str = Field(description="bad_request, unauthorized, forbidden, not_found, conflict, …")
    message: str
    problems: list[list[str]] | None = Field(
        default=None, description="422 only: [field path, reason] pairs"
    )


class ErrorBody(BaseModel):
    """Every error answer: ``{"detail": {"error", "message", ...}}``."""

    detail: ErrorDetail


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for error answers."""
    return {status: {"model": ErrorBody, "description": _WHY[status]} for status in statuses}


_WHY = {
    400: "malformed request, or a parameter out of range or unknown",
    401: "missing or wrong token",
    403: "the Host or Origin header is not this server's",
    404: "no such job",
    409: "a job with that name exists, or the job has already ended",
    422: "the spec (or job_name, code_uri) is invalid; problems name each field",
    503: "the metadata store cannot be used (it is locked, damaged or gone)",
    507: "the metadata store cannot be written: the disk under TRAINOPS_HOME is full",
}


def public_router(controller: JobController, settings: Settings, waiter: LogWaiter) -> APIRouter:
    """Every public route; with ``settings.token`` set, all but ``/health`` need that token."""

    def require_token(
        request: Request,
        _declared: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)] = None,
    ) -> None:
        # `_declared` only puts the bearer scheme into the OpenAPI document; the check is ours.
        if settings.token and not token_matches(bearer_token(request), settings.token):
            raise ApiError(
                401,
                "unauthorized",
                "missing or wrong token (Authorization: Bearer): the CLI and SDK read it from "
                "$TRAINOPS_HOME/token, or set TRAINOPS_TOKEN",
            )

    router = APIRouter(responses=errors(403))

    @router.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    guarded = APIRouter(dependencies=[Depends(require_token)], responses=errors(401))
    _service_routes(guarded, controller, settings)
    _job_routes(guarded, controller, settings)
    _stream_routes(guarded, controller, waiter)
    router.include_router(guarded)
    return router


def _service_routes(router: APIRouter, controller: JobController, settings: Settings) -> None:
    @router.get("/info")
    def info() -> dict[str, Any]:
        return {
            "version": __version__,
            "backend": controller.backend.name,
            "default_output_uri": settings.default_output_uri,
            "region": settings.region,
            "capacity": _amounts(controller.backend.capacity()),
        }

    @router.get("/cluster")
    def cluster() -> dict[str, Any]:
        """The machines the backend runs agents on, with what each has and what is free."""
        return {
            "backend": controller.backend.name,
            "nodes": [
                {
                    "node": node.name,
                    "capacity": _amounts(node.capacity),
                    "free": _amounts(node.free),
                }
                for node in controller.backend.nodes()
            ],
        }

    namer = JobNamer(lambda name: controller.store.get_job(name) is not None)

    @router.post("/job-names", responses=errors(400, 422))
    def new_job_name(body: NameRequest) -> dict[str, str]:
        """A job name no other job has or will be given: ``<base>-YYYY-MM-DD-HH-MM-SS-mmm``."""
        return {"job_name": namer.name(body.base_job_name)}


def _amounts(capacity: Capacity) -> dict[str, int]:
    return {"cpus": capacity.cpus, "memory_mb": capacity.memory_mb, "gpus": capacity.gpus}


def _job_routes(router: APIRouter, controller: JobController, settings: Settings) -> None:
    store = controller.store

    def described(job: JobRecord, status: int = 200) -> JSONResponse:
        return JSONResponse(describe(store, job, settings, time.time()), status_code=status)

    @router.post("/jobs", status_code=201, responses=errors(400, 409, 422))
    def submit(body: SubmitRequest) -> JSONResponse:
        job = controller.submit(body.job_name, JobSpec(**body.spec), body.code_uri)
        return described(job, 201)

    @router.get("/jobs", responses=errors(400))
    def list_jobs(
        status: Annotated[list[str] | None, Query()] = None,
        name_contains: str | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    ) -> JSONResponse:
        jobs = store.list_jobs(
            statuses=_statuses(status or []),
            name_contains=name_contains,
            created_after=_timestamp("created_after", created_after),
            created_before=_timestamp("created_before", created_before),
            limit=limit,
        )
        return JSONResponse({"jobs": [summary(j) for j in jobs]})

    @router.get("/jobs/{name}", responses=errors(404))
    def describe_job(name: str) -> JSONResponse:
        return described(controller.job(name))

    @router.post("/jobs/{name}/stop", status_code=202, responses=errors(404, 409))
    def stop_job(name: str) -> JSONResponse:
        return described(controller.stop(name), 202)


def _stream_routes(router: APIRouter, controller: JobController, waiter: LogWaiter) -> None:
    @router.get("/jobs/{name}/logs", responses=errors(400, 404))
    async def logs(
        name: str,
        after: Annotated[int, Query(ge=0)] = 0,
        host: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
        wait: Annotated[float, Query(ge=0, le=30)] = 0,
    ) -> JSONResponse:
        # Async: a long-poll waits on the event loop, holding no worker thread (LogWaiter).
        job, lines = await waiter.lines(name, after, host, limit, wait)
        return JSONResponse(log_page(lines, after, job))

    @router.get("/jobs/{name}/metrics", responses=errors(404))
    def metrics(
        name: str, metric: Annotated[str | None, Query(alias="name")] = None
    ) -> JSONResponse:
        controller.job(name)
        return JSONResponse(metric_points(controller.store, name, metric))


def _statuses(values: list[str]) -> list[str]:
    known = [s.value for s in PrimaryStatus]
    unknown = [v for v in values if v not in known]
    if unknown:
        raise ApiError(
            400, "bad_request", f"unknown status {unknown[0]!r}; use one of {', '.join(known)}"
        )
    return values


def _timestamp(field: str, value: str | None) -> float | None:
    if not value:  # absent or empty (`created_after=`): no bound
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(
            400, "bad_request", f"{field}: {value[:80]!r} is not an ISO 8601 time"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
