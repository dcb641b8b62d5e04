"""The job routes: a fresh job name, submit, list, describe, stop and interrupt (spot jobs).

A job's description is DescribeTrainingJob's keys (``server/_views.py``); the controller's errors
(an unknown job, one already ended, a bad spec) become their answers in ``server/_http.py``.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from trainops._settings import Settings
from trainops.control import JobController, PrimaryStatus
from trainops.server._http import ApiError
from trainops.server._routing import SQLITE_INT_MAX, Operation, Param
from trainops.server._views import LISTED_DETAILS, describe, listed_details, summary
from trainops.server.aws._sagemaker import cli_describe
from trainops.server.routes._shapes import API, DESCRIBED, JOB, STRING, SUBMITTED, json_object
from trainops.spec import JobNamer, JobSpec
from trainops.store import JOB_ORDERS, JobRecord

__all__ = [
    "JOB_DIRECTIONS",
    "InterruptRequest",
    "JobCursor",
    "JobRoutes",
    "NameRequest",
    "SubmitRequest",
    "job_cursor",
    "parse_cursor",
    "parse_timestamp",
]

#: The directions ``GET /jobs`` can list in (``order=``'s column, then submission order).
JOB_DIRECTIONS = ("desc", "asc")
_MAX_CURSOR = 2048


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
        order: str = "created",
        direction: str = "desc",
        after: JobCursor | None = None,
        include: list[str] | None = None,
    ) -> dict[str, Any]:
        """The jobs, by ``order`` (``created``, ``name`` or ``status``, then submission order)
        in ``direction``: newest first by default. ``next``, where more jobs follow, is the
        cursor to pass as ``after`` for the page after this one (keyset paging: every page costs what the first
        does). ``include`` adds describe's ``Cost``, ``FinalMetricDataList`` or ``Hosts`` to
        each job, read for the whole page at once (a query each), not a describe per job."""
        if after is not None and after.order != order:
            raise ApiError(400, "bad_request",
                           f"after: the cursor is of order {after.order!r}, not {order!r}")  # fmt: skip
        jobs = self.store.list_jobs(
            statuses=status or [],
            name_contains=name_contains,
            created_after=created_after,
            created_before=created_before,
            limit=limit + 1,  # one more: is there a page after this one?
            order=order,
            descending=direction == "desc",
            after=None if after is None else (after.value, after.id),
        )
        shown = jobs[:limit]
        answer: dict[str, Any] = {"jobs": [summary(j) for j in shown]}
        if include:
            extra = listed_details(self.store, shown, self.settings, time.time(), include)
            answer["jobs"] = [row | more for row, more in zip(answer["jobs"], extra, strict=True)]
        if len(jobs) > limit:
            answer["next"] = job_cursor(order, jobs[limit - 1])
        return answer

    def describe_job(self, name: str, shape: str = "rest") -> dict[str, Any]:
        job = self.controller.job(name)
        if shape == "sagemaker":  # what ``trainops describe`` prints
            return cli_describe(self.store, job, self.settings, time.time())
        return describe(self.store, job, self.settings, time.time())

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
                returns=json_object(
                    "jobs",
                    jobs={"type": "array", "items": JOB},
                    next={"type": "string", "description": "the ``after`` of the next page"},
                ),
                description="The jobs, newest first (or by ``order`` and ``direction``); ``next``, "
                "where more follow, is the ``after`` of the next page.",
            ),
            Operation(
                "GET",
                f"{API}/jobs/{{name}}",
                self.describe_job,
                params=_DESCRIBE_PARAMS,
                errors=(400, 404),
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


class JobCursor(NamedTuple):
    """Where a page of ``GET /jobs`` ended: its order, the last job's value of that order's
    column and its submission order."""

    order: str
    value: str | float
    id: int


def job_cursor(order: str, job: JobRecord) -> str:
    """The cursor after ``job`` in ``order`` (opaque to clients: URL-safe base64 of JSON)."""
    value = {"created": job.creation_time, "name": job.name, "status": job.status}[order]
    raw = json.dumps([order, value, job.order], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def parse_cursor(text: str) -> JobCursor | None:
    """A cursor :func:`job_cursor` made (``None`` for an empty one); ``ValueError`` says why
    it is not one."""
    if not text:
        return None
    try:
        if len(text) > _MAX_CURSOR:
            raise ValueError("too long")
        order, value, ident = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError, RecursionError, binascii.Error):
        raise ValueError(f"{text[:40]!r} is not a cursor this server gave") from None
    kind = float if order == "created" else str
    valid = (order in JOB_ORDERS and isinstance(value, kind | int) and not isinstance(value, bool)
             and type(ident) is int and 0 <= ident <= SQLITE_INT_MAX)  # fmt: skip
    if not valid or (kind is str and not isinstance(value, str)):
        raise ValueError(f"{text[:40]!r} is not a cursor this server gave")
    return JobCursor(order, float(value) if kind is float else value, ident)


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
_DESCRIBE_PARAMS = (
    Param(
        "shape",
        default="rest",
        choices=("rest", "sagemaker"),
        description="``sagemaker``: DescribeTrainingJob's members and nesting (ISO timestamps), "
        "trainops' own under ``Trainops``, as ``trainops describe`` prints it",
    ),
)

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
    Param("order", default="created", choices=tuple(JOB_ORDERS), description="sort by this"),
    Param("direction", default="desc", choices=JOB_DIRECTIONS),
    Param("after", convert=parse_cursor, description="a page's ``next``"),
    Param(
        "include",
        "array",
        choices=LISTED_DETAILS,
        description="describe's keys to add to each job (repeated), read for the page at once",
    ),
)
