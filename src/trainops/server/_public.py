"""The public API (``/api/v1``): health, info, names, submit, list, describe, stop, logs, metrics.

Each route is one :class:`~trainops.server._routing.Operation`: its parameters, body, success
status and every error answer it can give are declared there, and the same declaration parses
the request and writes the OpenAPI document, so the served document stays true (a schemathesis
run in the tests keeps it so). With ``settings.token`` set, all but ``/health`` need that token.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from trainops._settings import Settings
from trainops._version import __version__
from trainops.backends import Capacity
from trainops.control import JobController, PrimaryStatus
from trainops.server._longpoll import LogWaiter
from trainops.server._routing import SQLITE_INT_MAX, Operation, Param
from trainops.server._views import describe, log_page, metric_points, summary
from trainops.spec import JobNamer, JobSpec

__all__ = ["NameRequest", "SubmitRequest", "public_operations"]

API = "/api/v1"


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


def _object(*required: str, **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(required), "properties": properties}


_STRING = {"type": "string"}
_JOB = _object(
    "TrainingJobName",
    "TrainingJobStatus",
    "SecondaryStatus",
    TrainingJobName=_STRING,
    TrainingJobStatus=_STRING,
    SecondaryStatus=_STRING,
)
_RULE_STATUS = _object(
    "RuleConfigurationName",
    "RuleEvaluationStatus",
    "StatusDetails",
    "LastModifiedTime",
    RuleConfigurationName=_STRING,
    RuleEvaluationStatus={
        "type": "string",
        "enum": ["InProgress", "NoIssuesFound", "IssuesFound", "Error"],
    },
    StatusDetails=_STRING,
    LastModifiedTime=_STRING,
    Evaluation={
        "type": "object",
        "description": "the rule, its recommendation, evidence and what its actions did",
    },
)
_DESCRIBED = _object(
    *_JOB["required"],
    **_JOB["properties"],
    ProfilerRuleEvaluationStatuses={"type": "array", "items": _RULE_STATUS},
) | {"description": "the job, with the keys of SageMaker's DescribeTrainingJob"}
_INTEGER = {"type": "integer"}
_AMOUNTS = _object("cpus", "memory_mb", "gpus", cpus=_INTEGER, memory_mb=_INTEGER, gpus=_INTEGER)


def public_operations(
    controller: JobController, settings: Settings, waiter: LogWaiter
) -> list[Operation]:
    """Every public route, in the order the document lists them."""
    store = controller.store
    namer = JobNamer(lambda name: store.get_job(name) is not None)

    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    def info() -> dict[str, Any]:
        return {
            "version": __version__,
            "backend": controller.backend.name,
            "default_output_uri": settings.default_output_uri,
            "region": settings.region,
            "capacity": _amounts(controller.backend.capacity()),
        }

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

    def new_job_name(body: NameRequest) -> dict[str, str]:
        """A job name no other job has or will be given: ``<base>-YYYY-MM-DD-HH-MM-SS-mmm``."""
        return {"job_name": namer.name(body.base_job_name)}

    def submit(body: SubmitRequest) -> dict[str, Any]:
        job = controller.submit(body.job_name, JobSpec(**body.spec), body.code_uri)
        return describe(store, job, settings, time.time())

    def list_jobs(
        status: list[str] | None,
        name_contains: str | None,
        created_after: float | None,
        created_before: float | None,
        limit: int,
    ) -> dict[str, Any]:
        jobs = store.list_jobs(
            statuses=status or [],
            name_contains=name_contains,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
        )
        return {"jobs": [summary(j) for j in jobs]}

    def describe_job(name: str) -> dict[str, Any]:
        return describe(store, controller.job(name), settings, time.time())

    def stop_job(name: str) -> dict[str, Any]:
        return describe(store, controller.stop(name), settings, time.time())

    async def logs(
        name: str, after: int, host: str | None, limit: int, wait: float, shape: str
    ) -> dict[str, Any]:
        # Async: a long-poll waits on the event loop, holding no worker thread (LogWaiter).
        job, chunks = await waiter.lines(name, after, host, limit, wait)
        return log_page(chunks, after, job, runs=shape == "runs")

    def metrics(name: str, metric: str | None) -> dict[str, Any]:
        controller.job(name)
        return metric_points(store, name, metric)

    statuses = tuple(s.value for s in PrimaryStatus)
    return [
        Operation(
            "GET",
            f"{API}/health",
            health,
            store=False,
            returns=_object("status", "version", status=_STRING, version=_STRING),
        ),
        Operation(
            "GET",
            f"{API}/info",
            info,
            auth="token",
            returns=_object(
                "version",
                "backend",
                "region",
                "capacity",
                version=_STRING,
                backend=_STRING,
                region=_STRING,
                capacity=_AMOUNTS,
            ),
        ),
        Operation(
            "GET",
            f"{API}/cluster",
            cluster,
            auth="token",
            returns=_object(
                "backend",
                "nodes",
                backend=_STRING,
                nodes={
                    "type": "array",
                    "items": _object(
                        "node", "capacity", "free", node=_STRING, capacity=_AMOUNTS, free=_AMOUNTS
                    ),
                },
            ),
        ),
        Operation(
            "POST",
            f"{API}/job-names",
            new_job_name,
            body=NameRequest,
            errors=(400, 422),
            auth="token",
            returns=_object("job_name", job_name=_STRING),
        ),
        Operation(
            "POST",
            f"{API}/jobs",
            submit,
            body=SubmitRequest,
            max_body=16 * 1024 * 1024,
            status=201,
            errors=(400, 409, 422),
            auth="token",
            returns=_DESCRIBED,
        ),
        Operation(
            "GET",
            f"{API}/jobs",
            list_jobs,
            params=(
                Param("status", "array", choices=statuses, description="only jobs in these"),
                Param("name_contains", description="only jobs whose name has this (any case)"),
                Param(
                    "created_after",
                    convert=_timestamp,
                    description="an ISO 8601 time (UTC unless it says); empty: no bound",
                ),
                Param(
                    "created_before",
                    convert=_timestamp,
                    description="an ISO 8601 time (UTC unless it says); empty: no bound",
                ),
                Param("limit", "integer", default=50, ge=1, le=1000),
            ),
            errors=(400,),
            auth="token",
            returns=_object("jobs", jobs={"type": "array", "items": _JOB}),
            description="The jobs, newest first.",
        ),
        Operation(
            "GET",
            f"{API}/jobs/{{name}}",
            describe_job,
            errors=(404,),
            auth="token",
            returns=_DESCRIBED,
        ),
        Operation(
            "POST",
            f"{API}/jobs/{{name}}/stop",
            stop_job,
            status=202,
            errors=(404, 409),
            auth="token",
            returns=_DESCRIBED,
        ),
        Operation(
            "GET",
            f"{API}/jobs/{{name}}/logs",
            logs,
            params=(
                Param(
                    "after",
                    "integer",
                    default=0,
                    ge=0,
                    le=SQLITE_INT_MAX,
                    description="the cursor of the last line already read",
                ),
                Param("host", description="only this host's lines (algo-1, ...)"),
                Param("limit", "integer", default=1000, ge=1, le=10000),
                Param(
                    "wait",
                    "number",
                    default=0,
                    ge=0,
                    le=30,
                    description="seconds to wait for a line or a status change when none is there yet",
                ),
                Param(
                    "format",
                    default="lines",
                    choices=("lines", "runs"),
                    arg="shape",
                    description="lines: an object per line; runs: lines that share host, "
                    "stream, rank and time together, with the cursor of the first",
                ),
            ),
            errors=(400, 404),
            auth="token",
            returns=_object(
                "next",
                "TrainingJobStatus",
                "SecondaryStatus",
                lines={"type": "array", "items": {"type": "object"}},
                runs={"type": "array", "items": {"type": "object"}},
                next={"type": "integer"},
                TrainingJobStatus=_STRING,
                SecondaryStatus=_STRING,
            ),
        ),
        Operation(
            "GET",
            f"{API}/jobs/{{name}}/metrics",
            metrics,
            params=(Param("name", arg="metric", description="only this metric"),),
            errors=(404,),
            auth="token",
            returns=_object("metrics", metrics={"type": "array", "items": {"type": "object"}}),
        ),
    ]


def _amounts(capacity: Capacity) -> dict[str, int]:
    return {"cpus": capacity.cpus, "memory_mb": capacity.memory_mb, "gpus": capacity.gpus}


def _timestamp(value: str) -> float | None:
    if not value:  # empty (`created_after=`): no bound
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value[:80]!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
