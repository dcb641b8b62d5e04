"""The job routes: a fresh job name, submit, list, describe, stop and interrupt (spot jobs).

A job's description is DescribeTrainingJob's keys (``server/_views.py``); the controller's errors
(an unknown job, one already ended, a bad spec) become their answers in ``server/_http.py``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainops._settings import Settings
from trainops.control import JobController, PrimaryStatus
from trainops.server._routing import Operation, Param
from trainops.server._views import describe, summary
from trainops.server.routes._shapes import API, DESCRIBED, JOB, STRING, SUBMITTED, json_object
from trainops.spec import JobNamer, JobSpec

__all__ = ["InterruptRequest", "JobRoutes", "NameRequest", "SubmitRequest", "parse_timestamp"]


class SubmitRequest(BaseModel):
    """A job to run: its name, its spec (``JobSpec`` as JSON) and the uploaded code."""

    job_name: str
    spec: dict[str, Any] = Field(
        description="the job spec (docs/job-spec.md); anything else is a 422 naming the field",
        json_schema_extra={"required": ["entry_point"]},
    )
    code_uri: str = Field(description="URI of the packed source directory (sourcedir.tar.gz)")


class InterruptRequest(BaseModel):
    """A spot interruption, as spot capacity being reclaimed would make one (a rehearsal)."""

    model_config = ConfigDict(extra="forbid")

    hosts: list[str] | None = Field(
        default=None,
        max_length=64,
        description="the hosts reclaimed (e.g. algo-2); all where omitted; the whole job "
        "restarts either way, as on SageMaker",
    )
    capacity_gap_seconds: float = Field(
        default=0.0, description="how long no capacity comes back (the job waits in Pending)"
    )
    notice_seconds: float | None = Field(
        default=None,
        description="SIGTERM to SIGKILL on the hosts; the spec's grace period where omitted",
    )
    message: str = Field(default="", max_length=500, description="why, for the job's status")


class NameRequest(BaseModel):
    """Ask for a fresh job name made from a base name (``POST /job-names``)."""

    base_job_name: str


class JobRoutes:
    """The jobs of ``controller``: each handler takes the request's values and answers JSON."""

    def __init__(self, controller: JobController, settings: Settings) -> None:
        self.controller = controller
        self.settings = settings
        self.store = controller.store
        self._namer = JobNamer(lambda name: self.store.get_job(name) is not None)

    # The handlers' docstrings are their operations' descriptions in the OpenAPI document.

    def new_job_name(self, body: NameRequest) -> dict[str, str]:
        """A job name no other job has or will be given: ``<base>-YYYY-MM-DD-HH-MM-SS-mmm``."""
        return {"job_name": self._namer.name(body.base_job_name)}

    def submit(self, body: SubmitRequest) -> dict[str, Any]:
        """Create the job; its description, with ``Warnings``: what it will not get where it
        runs (private namespaces, /opt/ml), one line each, said now rather than in its log."""
        spec = JobSpec(**body.spec)
        job = self.controller.submit(body.job_name, spec, body.code_uri)
        described = describe(self.store, job, self.settings, time.time())
        return described | {"Warnings": self.controller.submission_warnings(spec)}

    def list_jobs(
        self,
        status: list[str] | None,
        name_contains: str | None,
        created_after: float | None,
        created_before: float | None,
        limit: int,
    ) -> dict[str, Any]:
        jobs = self.store.list_jobs(
            statuses=status or [],
            name_contains=name_contains,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
        )
        return {"jobs": [summary(j) for j in jobs]}

    def describe_job(self, name: str) -> dict[str, Any]:
        return describe(self.store, self.controller.job(name), self.settings, time.time())

    def stop_job(self, name: str) -> dict[str, Any]:
        return describe(self.store, self.controller.stop(name), self.settings, time.time())

    def interrupt_job(self, name: str, body: InterruptRequest) -> dict[str, Any]:
        """Interrupt a running spot job as a spot reclaim would (SIGTERM with the notice, then
        Interrupted, Pending for the capacity gap, and a new attempt that resumes from the
        checkpoint). 409 for a job that is not a spot job in Downloading or Training."""
        job = self.controller.interrupt(
            name,
            hosts=body.hosts,
            source="API request",
            message=body.message,
            capacity_gap_seconds=body.capacity_gap_seconds,
            notice_seconds=body.notice_seconds,
        )
        return describe(self.store, job, self.settings, time.time())

    def operations(self) -> list[Operation]:
        """``POST /job-names``, ``POST /jobs``, ``GET /jobs``, ``GET /jobs/{name}``,
        ``POST /jobs/{name}/stop`` and ``POST /jobs/{name}/interrupt``, in this order."""
        return [
            Operation(
                "POST",
                f"{API}/job-names",
                self.new_job_name,
                body=NameRequest,
                errors=(400, 422),
                auth="token",
                returns=json_object("job_name", job_name=STRING),
            ),
            Operation(
                "POST",
                f"{API}/jobs",
                self.submit,
                body=SubmitRequest,
                max_body=16 * 1024 * 1024,
                status=201,
                errors=(400, 409, 422),
                auth="token",
                returns=SUBMITTED,
            ),
            Operation(
                "GET",
                f"{API}/jobs",
                self.list_jobs,
                params=_LIST_PARAMS,
                errors=(400,),
                auth="token",
                returns=json_object("jobs", jobs={"type": "array", "items": JOB}),
                description="The jobs, newest first.",
            ),
            Operation(
                "GET",
                f"{API}/jobs/{{name}}",
                self.describe_job,
                errors=(404,),
                auth="token",
                returns=DESCRIBED,
            ),
            Operation(
                "POST",
                f"{API}/jobs/{{name}}/stop",
                self.stop_job,
                status=202,
                errors=(404, 409),
                auth="token",
                returns=DESCRIBED,
            ),
            Operation(
                "POST",
                f"{API}/jobs/{{name}}/interrupt",
                self.interrupt_job,
                body=InterruptRequest,
                status=202,
                errors=(400, 404, 409, 422),
                auth="token",
                returns=DESCRIBED,
            ),
        ]


def parse_timestamp(value: str) -> float | None:
    """An ISO 8601 time (UTC unless it says) as a Unix time; ``None`` for an empty one."""
    if not value:  # empty (`created_after=`): no bound
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value[:80]!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


_TIME = "an ISO 8601 time (UTC unless it says); empty: no bound"
_LIST_PARAMS = (
    Param(
        "status",
        "array",
        choices=tuple(s.value for s in PrimaryStatus),
        description="only jobs in these",
    ),
    Param("name_contains", description="only jobs whose name has this (any case)"),
    Param("created_after", convert=parse_timestamp, description=_TIME),
    Param("created_before", convert=parse_timestamp, description=_TIME),
    Param("limit", "integer", default=50, ge=1, le=1000),
)
