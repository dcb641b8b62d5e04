"""``GET /jobs/{name}/metric-series``: a metric downsampled on the server, each bucket keeping
its points' min, max and last value, read from the store's chunks (400,000 points too); and
``GET /jobs/{name}/logs?tail=N``, a log's last lines found from its newest chunk back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.control._harness import code_uri, fake_backend, job_spec
from trainops import JobNotFoundError
from trainops._settings import Settings
from trainops.control import JobController
from trainops.protocol import AgentEvent, EventKind
from trainops.server._longpoll import LogWaiter
from trainops.server.routes import JobOutputRoutes, JobRoutes, SubmitRequest
from trainops.store import MetadataStore, NewHost


@pytest.fixture
def output(settings: Settings) -> Iterator[JobOutputRoutes]:
    store = MetadataStore(settings.db_path)
    controller = JobController(settings, store, fake_backend(settings))
    try:
        body = SubmitRequest(job_name="plotted", spec=job_spec(), code_uri=code_uri(settings))
        JobRoutes(controller, settings).submit(body)
        attempt = controller.job("plotted").attempt
        store.create_hosts("plotted", attempt, [NewHost(host="algo-1", root="/r", state_dir="/s")])
        yield JobOutputRoutes(controller, LogWaiter(controller))
    finally:
        controller.close()
        store.close()


def _metric(seq: int, name: str, ts: float, values: list[float]) -> AgentEvent:
    return AgentEvent(seq, ts, EventKind.METRIC, {"name": name, "values": values, "timestamp": ts})


def _ingest(output: JobOutputRoutes, events: list[AgentEvent]) -> None:
    store = output.controller.store
    store.ingest("plotted", "algo-1", output.controller.job("plotted").attempt, events)


def test_each_bucket_keeps_min_max_and_last(output: JobOutputRoutes) -> None:
    # Times 0..9, two points each; 5 buckets: two times per bucket.
    _ingest(
        output, [_metric(2 * t + 1, "loss", 100.0 + t, [float(t), -float(t)]) for t in range(10)]
    )
    (series,) = output.metric_series("plotted", "loss", 5)["series"]
    assert series["MetricName"] == "loss" and series["Count"] == 20
    buckets = series["Buckets"]
    assert [(b["Min"], b["Max"], b["Last"], b["Count"]) for b in buckets] == [
        (-1.0, 1.0, -1.0, 4),
        (-3.0, 3.0, -3.0, 4),
        (-5.0, 5.0, -5.0, 4),
        (-7.0, 7.0, -7.0, 4),
        (-9.0, 9.0, -9.0, 4),
    ]
    assert (buckets[0]["Start"], buckets[-1]["End"]) == (100.0, 109.0)


def test_every_metric_without_a_name_and_none_for_an_unknown_one(output: JobOutputRoutes) -> None:
    _ingest(output, [_metric(1, "b<script>", 1.0, [2.0]), _metric(2, "a", 1.0, [1.0])])
    every = output.metric_series("plotted", None, 800)["series"]
    assert [(s["MetricName"], s["Count"]) for s in every] == [("a", 1), ("b<script>", 1)]
    assert output.metric_series("plotted", "nothing", 800)["series"] == [
        {"MetricName": "nothing", "Count": 0, "Buckets": []}
    ]
    with pytest.raises(JobNotFoundError):
        output.metric_series("ghost", None, 800)


def test_400000_points_come_back_as_at_most_width_buckets(output: JobOutputRoutes) -> None:
    batch = 200  # as the agent sends them: many points per chunk
    events = [
        _metric(i * batch + 1, "loss", float(i), [float(i * batch + k) for k in range(batch)])
        for i in range(2000)
    ]
    _ingest(output, events)
    started = time.perf_counter()
    (series,) = output.metric_series("plotted", "loss", 800)["series"]
    took = time.perf_counter() - started
    assert series["Count"] == 400_000 and len(series["Buckets"]) == 800
    assert series["Buckets"][0]["Min"] == 0.0 and series["Buckets"][-1]["Max"] == 399_999.0
    print(f"400,000 points in 800 buckets: {took * 1000:.1f} ms")


def _lines(output: JobOutputRoutes, **query: Any) -> list[str]:
    async def read() -> list[str]:
        await output.waiter.start()
        try:
            args = {"after": 0, "host": None, "limit": 1000, "wait": 0, "shape": "lines"} | query
            page = await output.logs("plotted", **args)
            return [line["line"] for line in page["lines"]]
        finally:
            output.waiter.stop()

    # A thread of its own: the browser tests' Playwright keeps an event loop in the main thread.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, read()).result()


def test_the_log_tail_is_its_last_lines_however_long_it_is(output: JobOutputRoutes) -> None:
    lines = [f"line {i}" for i in range(5000)]
    _ingest(output, [AgentEvent(1, 1.0, EventKind.LOG, {"stream": "stdout", "lines": lines})])
    assert _lines(output, tail=3) == ["line 4997", "line 4998", "line 4999"]
    assert _lines(output, tail=3000, limit=2) == ["line 2000", "line 2001"]
    assert len(_lines(output, tail=9999)) == 1000  # all 5000 lines, a page of them
    assert _lines(output, tail=3, host="algo-2") == []
