"""What a job writes: its log lines (``GET /jobs/{name}/logs``, a long-poll when asked to wait)
and its metrics (``GET /jobs/{name}/metrics``)."""

from __future__ import annotations

from typing import Any

from trainops.control import JobController
from trainops.server._longpoll import LogWaiter
from trainops.server._routing import SQLITE_INT_MAX, Operation, Param
from trainops.server._views import log_page, metric_points
from trainops.server.routes._shapes import API, STRING, json_object

__all__ = ["JobOutputRoutes"]


class JobOutputRoutes:
    """A job's log lines, read through ``waiter``, and its metrics, read from the store."""

    def __init__(self, controller: JobController, waiter: LogWaiter) -> None:
        self.controller = controller
        self.waiter = waiter

    async def logs(
        self, name: str, after: int, host: str | None, limit: int, wait: float, shape: str
    ) -> dict[str, Any]:
        # Async: a long-poll waits on the event loop, holding no worker thread (LogWaiter).
        job, chunks = await self.waiter.lines(name, after, host, limit, wait)
        return log_page(chunks, after, job, runs=shape == "runs")

    def metrics(self, name: str, metric: str | None) -> dict[str, Any]:
        self.controller.job(name)  # an unknown job is a 404, not an empty list
        return metric_points(self.controller.store, name, metric)

    def operations(self) -> list[Operation]:
        """``GET /jobs/{name}/logs`` and ``GET /jobs/{name}/metrics``, in this order."""
        return [
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/logs",
                self.logs,
                params=_LOG_PARAMS,
                errors=(400, 404),
                auth="token",
                returns=json_object(
                    "next",
                    "TrainingJobStatus",
                    "SecondaryStatus",
                    lines={"type": "array", "items": {"type": "object"}},
                    runs={"type": "array", "items": {"type": "object"}},
                    next={"type": "integer"},
                    TrainingJobStatus=STRING,
                    SecondaryStatus=STRING,
                ),
            ),
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/metrics",
                self.metrics,
                params=(Param("name", arg="metric", description="only this metric"),),
                errors=(404,),
                auth="token",
                returns=json_object(
                    "metrics", metrics={"type": "array", "items": {"type": "object"}}
                ),
            ),
        ]


_LOG_PARAMS = (
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
)
