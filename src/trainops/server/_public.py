"""The public API (``/api/v1``): health, info, submit, list, describe, stop, logs, metrics."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from trainops._settings import Settings
from trainops._version import __version__
from trainops.control import ENDED, JobController, PrimaryStatus
from trainops.server._http import ApiError, bearer_token, token_matches
from trainops.server._views import describe, log_page, metric_points, summary
from trainops.spec import JobSpec
from trainops.store import JobRecord, LogLine

__all__ = ["SubmitRequest", "public_router"]


class SubmitRequest(BaseModel):
    """A job to run: its name, its spec (``JobSpec`` as JSON) and the uploaded code."""

    job_name: str
    spec: dict[str, Any]
    code_uri: str = Field(description="URI of the packed source directory (sourcedir.tar.gz)")


def public_router(controller: JobController, settings: Settings) -> APIRouter:
    """Every public route; with ``settings.token`` set, each one needs that bearer token."""

    def require_token(request: Request) -> None:
        if settings.token and not token_matches(bearer_token(request), settings.token):
            raise ApiError(401, "unauthorized", "missing or wrong token (Authorization: Bearer)")

    router = APIRouter(dependencies=[Depends(require_token)])
    _service_routes(router, controller, settings)
    _job_routes(router, controller, settings)
    _stream_routes(router, controller)
    return router


def _service_routes(router: APIRouter, controller: JobController, settings: Settings) -> None:
    @router.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    @router.get("/info")
    def info() -> dict[str, Any]:
        capacity = controller.backend.capacity()
        return {
            "version": __version__,
            "backend": controller.backend.name,
            "default_output_uri": settings.default_output_uri,
            "region": settings.region,
            "capacity": {
                "cpus": capacity.cpus,
                "memory_mb": capacity.memory_mb,
                "gpus": capacity.gpus,
            },
        }


def _job_routes(router: APIRouter, controller: JobController, settings: Settings) -> None:
    store = controller.store

    def described(job: JobRecord, status: int = 200) -> JSONResponse:
        return JSONResponse(describe(store, job, settings, time.time()), status_code=status)

    @router.post("/jobs", status_code=201)
    def submit(body: SubmitRequest) -> JSONResponse:
        job = controller.submit(body.job_name, JobSpec(**body.spec), body.code_uri)
        return described(job, 201)

    @router.get("/jobs")
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

    @router.get("/jobs/{name}")
    def describe_job(name: str) -> JSONResponse:
        return described(controller.job(name))

    @router.post("/jobs/{name}/stop", status_code=202)
    def stop_job(name: str) -> JSONResponse:
        return described(controller.stop(name), 202)


def _stream_routes(router: APIRouter, controller: JobController) -> None:
    @router.get("/jobs/{name}/logs")
    def logs(
        name: str,
        after: Annotated[int, Query(ge=0)] = 0,
        host: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
        wait: Annotated[float, Query(ge=0, le=30)] = 0,
    ) -> JSONResponse:
        job, lines = _wait_for_lines(controller, name, after, host, limit, wait)
        return JSONResponse(log_page(lines, after, job))

    @router.get("/jobs/{name}/metrics")
    def metrics(
        name: str, metric: Annotated[str | None, Query(alias="name")] = None
    ) -> JSONResponse:
        controller.job(name)
        return JSONResponse(metric_points(controller.store, name, metric))


def _wait_for_lines(
    controller: JobController, name: str, after: int, host: str | None, limit: int, wait: float
) -> tuple[JobRecord, list[LogLine]]:
    """Lines after ``after``; with none yet, wait up to ``wait`` s for one or a status change."""
    deadline = time.monotonic() + wait
    version = controller.change_version
    job = controller.job(name)
    lines = controller.store.logs(name, after=after, host=host, limit=limit)
    while not lines and job.status not in ENDED and not controller.closing:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        version = controller.wait_for_change(version, remaining)
        fresh = controller.job(name)
        lines = controller.store.logs(name, after=after, host=host, limit=limit)
        if (fresh.status, fresh.secondary_status) != (job.status, job.secondary_status):
            return fresh, lines
        job = fresh
    return job, lines


def _statuses(values: list[str]) -> list[str]:
    known = [s.value for s in PrimaryStatus]
    unknown = [v for v in values if v not in known]
    if unknown:
        raise ApiError(
            400, "bad_request", f"unknown status {unknown[0]!r}; use one of {', '.join(known)}"
        )
    return values


def _timestamp(field: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(400, "bad_request", f"{field}: {value!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
