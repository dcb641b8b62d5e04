"""What a job writes: its log lines (``GET /jobs/{name}/logs``, a long-poll when asked to wait)
and its metrics (``GET /jobs/{name}/metrics``)."""

from __future__ import annotations

import asyncio
from typing import Any

from trainops.control import JobController
from trainops.server._longpoll import LogWaiter
from trainops.server._routing import SQLITE_INT_MAX, Operation, Param
from trainops.server._views import log_page, metric_points
from trainops.server.routes._shapes import API, STRING, json_object
from trainops.store import SeriesBucket

__all__ = ["JobOutputRoutes"]


class JobOutputRoutes:
    """A job's log lines, read through ``waiter``, and its metrics, read from the store."""

    def __init__(self, controller: JobController, waiter: LogWaiter) -> None:
        self.controller = controller
        self.waiter = waiter

    async def logs(
        self,
        name: str,
        after: int,
        host: str | None,
        limit: int,
        wait: float,
        shape: str,
        tail: int = 0,
    ) -> dict[str, Any]:
        # Async: a long-poll waits on the event loop, holding no worker thread (LogWaiter).
        if tail:  # the last `tail` lines: start where they begin
            store = self.controller.store
            after = await asyncio.to_thread(store.log_tail_cursor, name, host=host, lines=tail)
        job, chunks = await self.waiter.lines(name, after, host, limit, wait)
        return log_page(chunks, after, job, runs=shape == "runs")

    def metrics(self, name: str, metric: str | None) -> dict[str, Any]:
        self.controller.job(name)  # an unknown job is a 404, not an empty list
        return metric_points(self.controller.store, name, metric)

    def metric_series(self, name: str, metric: str | None, width: int) -> dict[str, Any]:
        """Each metric (or only ``metric``) downsampled on the server for a chart ``width``
        pixels wide: its time span cut into ``width`` buckets, each with the ``Min``, ``Max`` and
        ``Last`` value of its points, their ``Count`` and the ``Start`` and ``End`` time of its
        points (Unix seconds). Empty buckets are left out; 400,000 points answer quickly."""
        self.controller.job(name)  # an unknown job is a 404, not an empty list
        store = self.controller.store
        names = [metric] if metric is not None else [m.name for m in store.final_metrics(name)]
        return {"series": [_series(n, store.metric_series(name, n, width)) for n in names]}

    def operations(self) -> list[Operation]:
        """``GET /jobs/{name}/logs``, ``GET /jobs/{name}/metrics`` and
        ``GET /jobs/{name}/metric-series``, in this order."""
        return [
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/logs",
                self.logs,
                params=_LOG_PARAMS,
                errors=(400, 404),
                auth="token",
                long_poll=True,
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
            Operation(
                "GET",
                f"{API}/jobs/{{name}}/metric-series",
                self.metric_series,
                params=(
                    Param("name", arg="metric", description="only this metric"),
                    Param(
                        "width",
                        "integer",
                        default=800,
                        ge=1,
                        le=10000,
                        description="buckets (a chart's width in pixels)",
                    ),
                ),
                errors=(400, 404),
                auth="token",
                returns=json_object(
                    "series", series={"type": "array", "items": {"type": "object"}}
                ),
            ),
        ]


def _series(name: str, buckets: list[SeriesBucket]) -> dict[str, Any]:
    return {
        "MetricName": name,
        "Count": sum(b.count for b in buckets),
        "Buckets": [
            {
                "Start": b.start,
                "End": b.end,
                "Min": b.low,
                "Max": b.high,
                "Last": b.last,
                "Count": b.count,
            }
            for b in buckets
        ],
    }


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
        "tail",
        "integer",
        default=0,
        ge=0,
        le=10000,
        description="where above 0: the last `tail` lines (of `host`) instead of those after "
        "`after` (at most `limit` of them); `next` then follows from there",
    ),
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
