"""The public API's routes (``/api/v1``), one module per group, each handler importable alone.

Each group is a small class that takes what its handlers need (the controller, the settings, the
log waiter) and whose methods are the handlers: a test builds one around a real controller and
calls a handler with the request's values, no server needed. Its ``operations()`` declares each
route as a :class:`~trainops.server._routing.Operation`: its parameters, body, success status
and every error answer it can give; the same declaration parses the request and writes the
OpenAPI document, so the served document stays true (a schemathesis run in the tests keeps it
so). A handler's docstring is its operation's description there. With ``settings.token`` set,
all but ``/health`` need that token. docs/internals/routes.md says how to add a route.

- ``_cluster``: health, info and the backend's machines;
- ``_jobs``: job names, submit, list, describe and stop;
- ``_output``: a job's log lines (long-polled) and metrics;
- ``_events``: the change stream (a long-poll woken by the store's commits);
- ``_reports``: a job's profiler report;
- ``_tuning``: tuning jobs (create, list, describe, best trial, stop);
- ``_studies``: scaling studies (record, list, describe);
- ``_shapes``: the JSON schemas the answers share.
"""

from __future__ import annotations

from trainops._settings import Settings
from trainops.control import JobController
from trainops.server._events import ChangeFeed
from trainops.server._longpoll import LogWaiter
from trainops.server._routing import Operation
from trainops.server.routes._cluster import ClusterRoutes
from trainops.server.routes._events import EventRoutes
from trainops.server.routes._jobs import (
    JOB_DIRECTIONS,
    JobCursor,
    JobRoutes,
    NameRequest,
    SubmitRequest,
    job_cursor,
    parse_cursor,
    parse_timestamp,
)
from trainops.server.routes._output import JobOutputRoutes
from trainops.server.routes._reports import ReportRoutes
from trainops.server.routes._studies import StudyRequest, StudyRoutes, study_json
from trainops.server.routes._tuning import TuningRequest, TuningRoutes

__all__ = [
    "JOB_DIRECTIONS",
    "ClusterRoutes",
    "EventRoutes",
    "JobCursor",
    "JobOutputRoutes",
    "JobRoutes",
    "NameRequest",
    "ReportRoutes",
    "StudyRequest",
    "StudyRoutes",
    "SubmitRequest",
    "TuningRequest",
    "TuningRoutes",
    "job_cursor",
    "parse_cursor",
    "parse_timestamp",
    "public_operations",
    "study_json",
]


def public_operations(
    controller: JobController, settings: Settings, waiter: LogWaiter, feed: ChangeFeed | None = None
) -> list[Operation]:
    """Every public route, in the order the document lists them (``GET /events`` only with a
    ``feed``)."""
    return [
        *ClusterRoutes(controller, settings).operations(),
        *JobRoutes(controller, settings).operations(),
        *JobOutputRoutes(controller, waiter).operations(),
        *ReportRoutes(controller, settings).operations(),
        *TuningRoutes(controller).operations(),
        *StudyRoutes(controller).operations(),
        *([] if feed is None else EventRoutes(feed).operations()),
    ]
