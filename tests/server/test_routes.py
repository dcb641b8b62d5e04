"""The public routes' handlers, imported and called alone: a real store and controller, no server.

The controller is built but not started (no scheduler, no agents): a submitted job stays
Starting, which is all these handlers need. Over HTTP the same handlers are exercised by
test_server_api.py; here each one answers for itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import ValidationError

import trainops.server.routes as routes
from tests.control._harness import code_uri, fake_backend, job_spec
from trainops import JobNotFoundError, SpecError, _containment
from trainops._containment import Containment
from trainops._settings import Settings
from trainops._version import __version__
from trainops.control import JobController, JobEndedError
from trainops.protocol import AgentEvent, EventKind
from trainops.server._http import ApiError
from trainops.server._longpoll import LogWaiter
from trainops.server.routes import (
    ClusterRoutes,
    JobOutputRoutes,
    JobRoutes,
    NameRequest,
    ReportRoutes,
    SubmitRequest,
    parse_cursor,
    parse_timestamp,
    public_operations,
)
from trainops.store import MetadataStore, NewHost


@pytest.fixture
def controller(settings: Settings) -> Iterator[JobController]:
    store = MetadataStore(settings.db_path)
    made = JobController(settings, store, fake_backend(settings))
    try:
        yield made
    finally:
        made.close()
        store.close()


@pytest.fixture
def jobs(controller: JobController, settings: Settings) -> JobRoutes:
    return JobRoutes(controller, settings)


def _submit(jobs: JobRoutes, settings: Settings, name: str, **fields: Any) -> dict[str, Any]:
    body = SubmitRequest(job_name=name, spec=job_spec(**fields), code_uri=code_uri(settings))
    return jobs.submit(body)


def test_every_exported_name_resolves() -> None:
    assert [name for name in routes.__all__ if getattr(routes, name, None) is None] == []


def test_the_table_lists_every_public_route_once_in_document_order(
    controller: JobController, settings: Settings
) -> None:
    table = public_operations(controller, settings, LogWaiter(controller))
    assert [(op.method, op.path.removeprefix("/api/v1"), op.name) for op in table] == [
        ("GET", "/health", "health"),
        ("GET", "/info", "info"),
        ("GET", "/cluster", "cluster"),
        ("POST", "/job-names", "new_job_name"),
        ("POST", "/jobs", "submit"),
        ("GET", "/jobs", "list_jobs"),
        ("GET", "/jobs/{name}", "describe_job"),
        ("POST", "/jobs/{name}/stop", "stop_job"),
        ("POST", "/jobs/{name}/interrupt", "interrupt_job"),
        ("GET", "/jobs/{name}/logs", "logs"),
        ("GET", "/jobs/{name}/metrics", "metrics"),
        ("GET", "/jobs/{name}/metric-series", "metric_series"),
        ("GET", "/jobs/{name}/profiler-report", "profiler_report"),
        ("GET", "/jobs/{name}/cost", "cost"),
        ("GET", "/jobs/{name}/checkpoints", "checkpoints"),
        ("POST", "/tuning-jobs", "create"),
        ("GET", "/tuning-jobs", "list_tuning_jobs"),
        ("GET", "/tuning-jobs/{name}", "describe"),
        ("GET", "/tuning-jobs/{name}/best", "best"),
        ("GET", "/tuning-jobs/{name}/analysis", "analysis"),
        ("POST", "/tuning-jobs/{name}/stop", "stop"),
        ("POST", "/studies", "put_study"),
        ("GET", "/studies", "list_studies"),
        ("GET", "/studies/{name}", "describe_study"),
    ]
    assert [op.path for op in table if op.auth is None] == ["/api/v1/health"]


def test_submit_describe_list_and_stop(jobs: JobRoutes, settings: Settings) -> None:
    submitted = _submit(jobs, settings, "first", environment={"API_KEY": "s3cr3t"})
    assert submitted["TrainingJobName"] == "first"
    assert submitted["TrainingJobStatus"] == "InProgress"
    assert "s3cr3t" not in repr(submitted)  # the description masks the job's secrets
    _submit(jobs, settings, "second")

    assert jobs.describe_job("first")["TrainingJobName"] == "first"
    listed = jobs.list_jobs(None, "SEC", None, None, limit=50)
    assert [j["TrainingJobName"] for j in listed["jobs"]] == ["second"]
    assert len(jobs.list_jobs(["InProgress"], None, None, None, limit=1)["jobs"]) == 1
    assert jobs.list_jobs(["Completed"], None, None, None, limit=50) == {"jobs": []}

    # Not placed yet (the controller is not started): no host to wait for, so it ends at once.
    assert jobs.stop_job("first")["TrainingJobStatus"] == "Stopped"
    with pytest.raises(JobEndedError, match="has already ended"):
        jobs.stop_job("first")


def test_an_unknown_job_is_not_found_by_every_handler(
    controller: JobController, settings: Settings, jobs: JobRoutes
) -> None:
    output = JobOutputRoutes(controller, LogWaiter(controller))
    report = ReportRoutes(controller, settings)
    for handler in (jobs.describe_job, jobs.stop_job, report.profiler_report):
        with pytest.raises(JobNotFoundError, match="no job named 'ghost'"):
            handler("ghost")
    with pytest.raises(JobNotFoundError, match="no job named 'ghost'"):
        report.cost("ghost", None, None)
    with pytest.raises(JobNotFoundError):
        output.metrics("ghost", None)


def test_a_bad_spec_is_refused_naming_the_field(jobs: JobRoutes, settings: Settings) -> None:
    with pytest.raises(SpecError, match="instance_count"):
        _submit(jobs, settings, "bad", instance_count=-1)
    with pytest.raises(JobNotFoundError):
        jobs.describe_job("bad")


def test_new_job_names_are_fresh_and_checked(jobs: JobRoutes) -> None:
    first = jobs.new_job_name(NameRequest(base_job_name="my-train"))["job_name"]
    second = jobs.new_job_name(NameRequest(base_job_name="my-train"))["job_name"]
    assert first.startswith("my-train-") and second.startswith("my-train-")
    assert first != second
    with pytest.raises(SpecError, match="base_job_name"):
        jobs.new_job_name(NameRequest(base_job_name="../../etc/passwd"))


def test_timestamps_are_iso_8601_and_utc_unless_they_say() -> None:
    assert parse_timestamp("") is None
    assert parse_timestamp("1970-01-01T00:01:00") == 60.0
    assert parse_timestamp("1970-01-01T01:01:00+01:00") == 60.0
    with pytest.raises(ValueError, match="is not an ISO 8601 time") as caught:
        parse_timestamp("x" * 10_000)
    assert len(str(caught.value)) < 120  # the hostile value is cut, not echoed whole


def test_info_and_cluster_answer_from_the_backend(
    controller: JobController, settings: Settings
) -> None:
    cluster = ClusterRoutes(controller, settings)
    assert cluster.health() == {"status": "ok", "version": __version__}
    amounts = {"cpus": 4, "memory_mb": 64_000, "gpus": 0}  # the settings fixture's capacity
    info = cluster.info()
    assert (info["backend"], info["capacity"], info["region"]) == (
        "local",
        amounts,
        settings.region,
    )
    nodes = cluster.cluster()["nodes"]
    assert [(n["capacity"], n["free"]) for n in nodes] == [(amounts, amounts)]


def test_logs_and_metrics_of_a_job(
    controller: JobController, jobs: JobRoutes, settings: Settings
) -> None:
    _submit(jobs, settings, "talker")
    attempt = controller.job("talker").attempt
    store = controller.store
    store.create_hosts("talker", attempt, [NewHost(host="algo-1", root="/r", state_dir="/s")])
    events = [
        AgentEvent(1, 10.0, EventKind.LOG, {"stream": "stdout", "lines": ["epoch 1", "loss=0.5"]}),
        AgentEvent(3, 10.0, EventKind.METRIC, {"name": "loss", "value": 0.5, "timestamp": 10.0}),
    ]
    store.ingest("talker", "algo-1", attempt, events)
    output = JobOutputRoutes(controller, LogWaiter(controller))

    page = _run_with_waiter(output, "talker", after=0)
    assert [line["line"] for line in page["lines"]] == ["epoch 1", "loss=0.5"]
    assert page["TrainingJobStatus"] == "InProgress"
    assert _run_with_waiter(output, "talker", after=page["next"])["lines"] == []
    metrics = output.metrics("talker", "loss")["metrics"]
    assert [(m["MetricName"], m["Value"]) for m in metrics] == [("loss", 0.5)]
    assert output.metrics("talker", "accuracy") == {"metrics": []}


def _run_with_waiter(output: JobOutputRoutes, name: str, after: int) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        await output.waiter.start()
        try:
            return await output.logs(name, after, None, 100, wait=0, shape="lines")
        finally:
            output.waiter.stop()

    # A thread of its own: the browser tests' Playwright keeps an event loop in the main thread.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, read()).result()


def test_a_job_without_profiler_data_has_no_report(
    controller: JobController, jobs: JobRoutes, settings: Settings
) -> None:
    _submit(jobs, settings, "quiet")
    with pytest.raises(ApiError) as caught:
        ReportRoutes(controller, settings).profiler_report("quiet")
    assert (caught.value.status, caught.value.error) == (404, "not_found")


def test_submission_says_in_one_line_what_the_machine_cannot_give(
    jobs: JobRoutes, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = Containment(False, False, "[Errno 1] unshare: Operation not permitted")
    monkeypatch.setattr(_containment, "_probed", refused)  # the probe's answer on such a machine
    submitted = _submit(jobs, settings, "contained")
    [warning] = submitted["Warnings"]
    assert warning == refused.note(True) and "unshare: Operation not permitted" in warning
    assert "/opt/ml" not in _submit(jobs, settings, "no-opt-ml", mount_opt_ml=False)["Warnings"][0]
    monkeypatch.setattr(_containment, "_probed", Containment(True, True))
    assert _submit(jobs, settings, "free")["Warnings"] == []


def test_a_starting_jobs_cost_is_nothing_yet_at_prices_that_say_where_they_come_from(
    controller: JobController, settings: Settings, jobs: JobRoutes
) -> None:
    _submit(jobs, settings, "costly")
    cost = ReportRoutes(controller, settings).cost("costly", 2.0, None)
    assert (cost["Running"], cost["BillableTimeInSeconds"], cost["SpotCostUsd"]) == (True, 0, 0)
    assert cost["Prices"]["SpotPriceKind"] == "estimate" and cost["Interruptions"] == []
    assert cost["CheckpointInterval"]["InterruptionsPerHour"] == 2.0


_STUDY_ROW = {"label": "2 x ml.m5.large, 1/host", "instance_type": "ml.m5.large",
              "instance_count": 2, "processes_per_host": 1, "job_name": "j-2",
              "status": "Completed", "throughput": 200.0, "efficiency": 0.9}  # fmt: skip


def test_a_study_is_recorded_replaced_listed_and_described(controller: JobController) -> None:
    studies = routes.StudyRoutes(controller)
    first = routes.StudyRequest(name="s-1", title="train.py: scaling study", status="InProgress")
    assert studies.put_study(first)["rows"] == []
    ended = routes.StudyRequest(name="s-1", title="train.py: scaling study", status="Completed",
                                target_metric="acc", rows=[_STUDY_ROW])  # fmt: skip
    studies.put_study(ended)
    described = studies.describe_study("s-1")
    assert (described["status"], described["target_metric"]) == ("Completed", "acc")
    assert described["rows"] == [{"time_to_target_s": None, "billable_seconds": None,
                                  "cost_usd": None, **_STUDY_ROW}]  # fmt: skip
    assert [s["name"] for s in studies.list_studies(limit=50)["studies"]] == ["s-1"]
    with pytest.raises(JobNotFoundError, match="no study named 'nope'"):
        studies.describe_study("nope")


@pytest.mark.parametrize(
    "change",
    [
        {"name": "../etc/passwd"},
        {"name": ""},
        {"status": "Done"},
        {"title": "x" * 257},
        {"rows": [{**_STUDY_ROW, "throughput": float("nan")}]},
        {"rows": [{**_STUDY_ROW, "cost_usd": -1.0}]},
        {"rows": [{**_STUDY_ROW, "job_name": "a b"}]},
        {"rows": [{**_STUDY_ROW, "extra": 1}]},
        {"rows": [_STUDY_ROW] * 1001},
    ],
)
def test_a_hostile_study_is_refused(change: dict[str, Any]) -> None:
    body = {"name": "s", "title": "t", "status": "InProgress", **change}
    with pytest.raises(ValidationError):
        routes.StudyRequest(**body)


def test_the_listing_orders_and_pages_with_its_cursor(jobs: JobRoutes, settings: Settings) -> None:
    for name in ("b-job", "c-job", "a-job", "d-job"):
        _submit(jobs, settings, name)

    def listed(**query: Any) -> tuple[list[str], str | None]:
        answer = jobs.list_jobs(None, None, None, None, **query)
        return [j["TrainingJobName"] for j in answer["jobs"]], answer.get("next")

    assert listed(limit=10) == (["d-job", "a-job", "c-job", "b-job"], None)  # newest first
    first, cursor = listed(limit=3, order="name", direction="asc")
    assert first == ["a-job", "b-job", "c-job"] and cursor is not None
    assert listed(limit=3, order="name", direction="asc", after=parse_cursor(cursor)) == (
        ["d-job"],
        None,
    )
    assert listed(limit=2, order="name", direction="desc")[0] == ["d-job", "c-job"]
    with pytest.raises(ApiError, match="the cursor is of order 'name', not 'created'"):
        listed(limit=3, after=parse_cursor(cursor))
    for bad in ("yesterday", "W10=", "WyJuYW1lIiwgMSwgMV0", "Wy" * 2000, "W1tb" * 500):
        with pytest.raises(ValueError, match="is not a cursor this server gave"):
            parse_cursor(bad)
