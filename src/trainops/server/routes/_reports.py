"""The profiler report route: ``GET /api/v1/jobs/{name}/profiler-report``, the report's data.

The report is computed here, on the server, from the store and the job's profiler prefix, so a
client needs no access to the object store (a remote server's store may be out of its reach);
the CLI and the web UI render the same JSON (``trainops.report.render_html``).
"""

from __future__ import annotations

import time
from typing import Any

from trainops._settings import Settings
from trainops.control import JobController
from trainops.report import NoProfilerDataError, job_report
from trainops.server._http import ApiError
from trainops.server._routing import Operation
from trainops.server.routes._shapes import API

__all__ = ["ReportRoutes"]

_OBJECT = {"type": "object"}
_REPORT = {
    "type": "object",
    "required": ["version", "job", "sections", "advice"],
    "properties": {
        "version": {"type": "integer"},
        "job": _OBJECT,
        "sections": _OBJECT,
        "advice": _OBJECT,
        "timelines": _OBJECT,
        "heatmaps": _OBJECT,
    },
    "description": "the profiler report's data (docs/profiling-report.md)",
}


class ReportRoutes:
    """A job's profiler report, computed from ``controller``'s store and ``settings``."""

    def __init__(self, controller: JobController, settings: Settings) -> None:
        self.controller = controller
        self.settings = settings

    # The handler's docstring is its operation's description in the OpenAPI document.

    def profiler_report(self, name: str) -> dict[str, Any]:
        """The profiler report of a job, running or ended: job summary, system usage, framework
        metrics, rules, step durations, GPU, batch size, CPU and I/O bottlenecks, load
        balancing, GPU memory, and right-sizing advice. 404 for an unknown job or one without
        profiler data."""
        self.controller.job(name)
        try:
            return job_report(self.controller.store, self.settings, name, now=time.time())
        except NoProfilerDataError as exc:
            raise ApiError(404, "not_found", str(exc)) from None

    def operations(self) -> list[Operation]:
        """``GET /jobs/{name}/profiler-report``."""
        return [
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/profiler-report",
                self.profiler_report,
                errors=(404,),
                auth="token",
                returns=_REPORT,
            )
        ]
