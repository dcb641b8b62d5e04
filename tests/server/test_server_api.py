"""The public REST API over real HTTP: errors, auth, describe's shape, logs long-poll, filters."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from typing import Any

import httpx
import pytest

from tests.control._harness import ControlPlane, control_plane, wait_for
from tests.server.aws.test_schema import describe_errors
from trainops._settings import Settings

pytestmark = pytest.mark.slow

API = "/api/v1"

DESCRIBE_KEYS = {
    "TrainingJobName",
    "EnableManagedSpotTraining",
    "Interruptions",
    "ManagedSpotTrainingSavings",
    "TrainingJobStatus",
    "SecondaryStatus",
    "FailureReason",
    "CreationTime",
    "TrainingStartTime",
    "TrainingEndTime",
    "LastModifiedTime",
    "SecondaryStatusTransitions",
    "HyperParameters",
    "AlgorithmSpecification",
    "ResourceConfig",
    "InputDataConfig",
    "OutputDataConfig",
    "CheckpointConfig",
    "StoppingCondition",
    "RetryStrategy",
    "Environment",
    "ModelArtifacts",
    "Artifacts",
    "FinalMetricDataList",
    "TrainingTimeInSeconds",
    "BillableTimeInSeconds",
    "Cost",
    "Attempt",
    "Hosts",
    "ProfilerConfig",
    "ProfilingStatus",
    "ProfilerRuleConfigurations",
    "ProfilerRuleEvaluationStatuses",
    "DebugRuleEvaluationStatuses",
    "DebugHookConfig",
    "DebugOutputPath",
    "DebugRuleConfigurations",
    "TensorBoardOutputConfig",
}


def _detail(response: httpx.Response) -> dict[str, Any]:
    detail: dict[str, Any] = response.json()["detail"]
    return detail


def test_health_and_info(plane: ControlPlane, settings: Settings) -> None:
    assert plane.client.get(f"{API}/health").json() == {"status": "ok", "version": "0.1.0"}
    info = plane.client.get(f"{API}/info").json()
    assert info["backend"] == "local" and info["region"] == "us-east-1"
    assert info["default_output_uri"] == settings.default_output_uri
    assert plane.client.get("/openapi.json").json()["info"]["title"] == "trainops"


def test_the_cluster_shows_each_node_and_what_jobs_hold_of_it(plane: ControlPlane) -> None:
    def nodes() -> list[dict[str, Any]]:
        cluster = plane.client.get(f"{API}/cluster").json()
        assert cluster["backend"] == "local"
        found: list[dict[str, Any]] = cluster["nodes"]
        return found

    [idle] = nodes()
    assert idle["node"] == socket.gethostname()
    assert idle["free"] == idle["capacity"] == {"cpus": 4, "memory_mb": 64_000, "gpus": 0}
    plane.submit("holding", {"FAKE_LINES": "0", "FAKE_HANG_ATTEMPTS": "1"})  # ml.m5.large
    plane.wait_secondary("holding", "Training")
    [busy] = nodes()
    assert busy["free"] == {"cpus": 2, "memory_mb": 64_000 - 8192, "gpus": 0}
    assert [h["Node"] for h in plane.describe("holding")["Hosts"]] == [socket.gethostname()]
    plane.stop("holding")
    plane.wait_ended("holding")
    wait_for(lambda: nodes()[0]["free"] == idle["capacity"], what="the capacity back")


def test_an_invalid_spec_is_refused_with_its_problems(plane: ControlPlane) -> None:
    body = {"job_name": "bad", "spec": {"entry_point": "t.py", "instance_type": "ml.nope.large"}}
    response = plane.client.post(f"{API}/jobs", json={**body, "code_uri": plane.code_uri})
    assert response.status_code == 422
    detail = _detail(response)
    assert detail["error"] == "invalid_spec"
    assert [p[0] for p in detail["problems"]] == ["instance_type"]
    assert "unknown instance type 'ml.nope.large'" in detail["problems"][0][1]
    named = {"job_name": "-bad-", "spec": {"entry_point": "t.py"}, "code_uri": plane.code_uri}
    assert _detail(plane.client.post(f"{API}/jobs", json=named))["problems"][0][0] == "job_name"
    missing = {"job_name": "nocode", "spec": {"entry_point": "t.py"}, "code_uri": "file:///nope"}
    assert _detail(plane.client.post(f"{API}/jobs", json=missing))["problems"][0][0] == "code_uri"
    assert plane.client.get(f"{API}/jobs/nocode").status_code == 404


def test_error_answers_follow_the_documented_shape(plane: ControlPlane) -> None:
    malformed = plane.client.post(f"{API}/jobs", json={"job_name": "x"})
    assert (malformed.status_code, _detail(malformed)["error"]) == (400, "bad_request")
    missing = plane.client.get(f"{API}/jobs/ghost")
    assert (missing.status_code, _detail(missing)["error"]) == (404, "not_found")
    assert "ghost" in _detail(missing)["message"]
    plane.submit("twice", {"FAKE_LINES": "0"})
    again = plane.client.post(
        f"{API}/jobs",
        json={"job_name": "twice", "spec": {"entry_point": "t.py"}, "code_uri": plane.code_uri},
    )
    assert (again.status_code, _detail(again)["error"]) == (409, "conflict")
    plane.wait_ended("twice")
    ended = plane.stop("twice")
    assert (ended.status_code, _detail(ended)["error"]) == (409, "conflict")
    for query in ({"wait": 31}, {"limit": 0}, {"after": -1}):
        bad = plane.client.get(f"{API}/jobs/twice/logs", params=query)
        assert (bad.status_code, _detail(bad)["error"]) == (400, "bad_request")
    for rate in ("0", "-1", "nan", "inf", "3601", "1e400", "x"):  # an interruption rate
        bad = plane.client.get(f"{API}/jobs/twice/cost", params={"interruptions_per_hour": rate})
        assert (bad.status_code, _detail(bad)["error"]) == (400, "bad_request"), rate
    for seconds in ("0", "86401", "nan"):
        bad = plane.client.get(f"{API}/jobs/twice/cost", params={"checkpoint_seconds": seconds})
        assert (bad.status_code, _detail(bad)["error"]) == (400, "bad_request"), seconds
    asked = {"interruptions_per_hour": "0.5", "checkpoint_seconds": "2"}
    cost = plane.client.get(f"{API}/jobs/twice/cost", params=asked)
    assert cost.status_code == 200 and cost.json()["TrainingJobName"] == "twice"
    advice = cost.json()["CheckpointInterval"]
    assert (
        advice["InterruptionsPerHour"] == 0.5 and advice["BestIntervalSeconds"] == 169.706
    )  # sqrt(2 x 2 x 7200)
    assert plane.client.get(f"{API}/jobs/ghost/cost").status_code == 404
    bad_filter = plane.client.get(f"{API}/jobs", params={"status": "Running"})
    assert bad_filter.status_code == 400
    unknown_route = plane.client.get(f"{API}/nothing-here")
    assert (unknown_route.status_code, _detail(unknown_route)["error"]) == (404, "not_found")


def test_describe_has_the_documented_keys_and_hides_credentials(plane: ControlPlane) -> None:
    env = {"FAKE_LINES": "1", "PLAIN": "visible", "API_KEY": "k", "DB_PASSWORD": "p"}
    plane.submit(
        "shape",
        env,
        hyperparameters={"lr": 0.1, "name": "cnn", "layers": [1, 2]},
        inputs={"train": {"uri": "file:///data/train/", "distribution": "sharded"}},
        checkpoint={"uri": "file:///ckpt/"},
        metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}],
    )
    job = plane.wait_ended("shape")
    assert set(job) == DESCRIBE_KEYS
    assert job["Environment"] == {
        "FAKE_LINES": "1",
        "PLAIN": "visible",
        "API_KEY": "***",
        "DB_PASSWORD": "***",
    }
    assert job["HyperParameters"] == {"lr": "0.1", "name": "cnn", "layers": "[1, 2]"}
    assert job["InputDataConfig"] == [
        {
            "ChannelName": "train",
            "Uri": "file:///data/train/",
            "ContentType": None,
            "Distribution": "ShardedByKey",
            "ShuffleSeed": None,
            "InputMode": "File",
            "CompressionType": "None",
            "RecordWrapperType": "None",
            "S3DataType": "S3Prefix",
        }
    ]
    assert job["CheckpointConfig"] == {"S3Uri": "file:///ckpt/", "LocalPath": "/opt/ml/checkpoints"}
    assert job["AlgorithmSpecification"] == {
        "EntryPoint": "train.py",
        "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
    }
    assert job["ResourceConfig"] == {"InstanceType": "ml.m5.large", "InstanceCount": 1}
    assert job["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400, "GracePeriodInSeconds": 120}
    assert set(job["Cost"]) == {
        "Currency",
        "OnDemandUsdPerHour",
        "InstanceCount",
        "EstimatedCostUsd",
        "PricesAsOf",
        "Region",
        "SpotUsdPerHour",
        "SpotPriceKind",
        "EstimatedSpotCostUsd",
    }
    assert job["Cost"]["SpotPriceKind"] == "estimate"  # never shown as a quote
    assert job["Artifacts"] == [
        {
            "Name": "log",
            "Uri": job["OutputDataConfig"]["S3OutputPath"] + "/shape/logs/algo-1.log",
            "Host": "algo-1",
        }
    ]
    assert "k" not in str(plane.client.get(f"{API}/jobs").json())


def test_describe_in_the_sagemaker_shape_as_the_cli_prints_it(plane: ControlPlane) -> None:
    plane.submit("api-shape", {"FAKE_LINES": "1"})
    rest = plane.wait_ended("api-shape")
    found = plane.client.get(f"{API}/jobs/api-shape", params={"shape": "sagemaker"})
    assert found.status_code == 200, found.text
    shaped = found.json()
    assert describe_errors(shaped) == ""  # botocore's DescribeTrainingJob, minus Trainops
    assert shaped["Trainops"]["Hosts"] == rest["Hosts"] and "Hosts" not in shaped
    assert shaped["CreationTime"] == rest["CreationTime"]  # ISO, as the REST describe's
    bad = plane.client.get(f"{API}/jobs/api-shape", params={"shape": "<script>"})
    assert bad.status_code == 400 and "shape" in bad.text


def test_list_filters_and_newest_first(plane: ControlPlane) -> None:
    for name in ("alpha-1", "alpha-2", "beta-1"):
        plane.submit(name, {"FAKE_LINES": "0"})
    for name in ("alpha-1", "alpha-2", "beta-1"):
        plane.wait_ended(name)

    def names(**query: Any) -> list[str]:
        jobs = plane.client.get(f"{API}/jobs", params=query).json()["jobs"]
        return [j["TrainingJobName"] for j in jobs]

    assert names() == ["beta-1", "alpha-2", "alpha-1"]
    assert names(name_contains="ALPHA") == ["alpha-2", "alpha-1"]
    assert names(status=["Completed", "Failed"], limit=1) == ["beta-1"]
    assert names(status="Stopped") == []
    assert names(created_after="2000-01-01T00:00:00Z", created_before="2000-01-02T00:00:00") == []
    summary = plane.client.get(f"{API}/jobs").json()["jobs"][0]
    assert set(summary) == {
        "TrainingJobName",
        "TrainingJobStatus",
        "SecondaryStatus",
        "CreationTime",
        "TrainingEndTime",
        "LastModifiedTime",
        "InstanceType",
        "InstanceCount",
        "FailureReason",
    }


def test_logs_long_poll_answers_when_a_line_arrives(plane: ControlPlane) -> None:
    # Two lines 1.5 s apart, then Training until stopped: the job still trains when the poll
    # answers, however late the poll was sent on a busy machine.
    plane.submit("chatty", {"FAKE_LINES": "2", "FAKE_LINE_DELAY": "1.5", "FAKE_HANG_ATTEMPTS": "1"})
    first = wait_for(
        lambda: plane.client.get(f"{API}/jobs/chatty/logs").json()["lines"], what="the first line"
    )
    cursor = first[0]["cursor"]  # after line 0, whether line 1 came yet or not
    page = plane.client.get(f"{API}/jobs/chatty/logs", params={"after": cursor, "wait": 30}).json()
    assert [ln["line"] for ln in page["lines"]] == ["algo-1 line 1"]
    # Answered with the line while the job trains.
    assert (page["TrainingJobStatus"], page["SecondaryStatus"]) == ("InProgress", "Training")
    assert page["next"] == page["lines"][-1]["cursor"] > cursor
    assert set(page["lines"][0]) == {"cursor", "host", "stream", "timestamp", "line"}
    plane.stop("chatty")
    plane.wait_ended("chatty")
    done = plane.client.get(f"{API}/jobs/chatty/logs", params={"after": 10_000, "wait": 30})
    assert done.json() | {"lines": None} == {
        "lines": None,
        "next": 10_000,
        "TrainingJobStatus": "Stopped",
        "SecondaryStatus": "Stopped",
    }


def test_logs_long_poll_answers_on_a_status_change(plane: ControlPlane) -> None:
    plane.submit("quiet", {"FAKE_LINES": "0", "FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("quiet", "Training")
    answers: list[dict[str, Any]] = []
    query = {"after": 10_000, "wait": 30}  # no line can answer it: only a status change
    poll = threading.Thread(
        target=lambda: answers.append(
            plane.client.get(f"{API}/jobs/quiet/logs", params=query).json()
        )
    )
    poll.start()
    time.sleep(0.3)  # let the poll reach its wait (the answer is right either way)
    plane.stop("quiet")
    poll.join(timeout=30)
    assert answers and answers[0]["TrainingJobStatus"] in ("Stopping", "Stopped")
    plane.wait_ended("quiet")


def test_metrics_time_series(plane: ControlPlane) -> None:
    plane.submit("measured", {"FAKE_LINES": "3"})
    plane.wait_ended("measured")
    everything = plane.client.get(f"{API}/jobs/measured/metrics").json()["metrics"]
    assert len(everything) == 6
    loss = plane.client.get(f"{API}/jobs/measured/metrics", params={"name": "loss"}).json()
    assert [(m["MetricName"], m["Value"], m["Host"]) for m in loss["metrics"]] == [
        ("loss", 1.0, "algo-1"),
        ("loss", 0.5, "algo-1"),
        ("loss", pytest.approx(1 / 3), "algo-1"),
    ]
    assert plane.client.get(f"{API}/jobs/ghost/metrics").status_code == 404


def test_a_token_guards_the_public_api(settings: Settings) -> None:
    guarded = Settings(home=settings.home, capacity=settings.capacity, token="s3cret-token")
    with control_plane(guarded, token="s3cret-token") as plane:
        assert plane.client.get(f"{API}/health").status_code == 200
        plane.submit("guarded", {"FAKE_LINES": "1"})
        job = plane.wait_ended("guarded")
        url = plane.server.url
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            response = httpx.get(f"{url}{API}/jobs/guarded", headers=headers)
            assert response.status_code == 401
            assert _detail(response)["error"] == "unauthorized"
            assert "s3cret" not in response.text
    assert job["TrainingJobStatus"] == "Completed"


def test_the_agent_api_needs_the_job_agent_token(plane: ControlPlane) -> None:
    plane.submit("secured", {"FAKE_LINES": "0"})
    plane.wait_ended("secured")
    base = "/agent/v1/jobs/secured/hosts/algo-1"
    for headers in ({}, {"Authorization": "Bearer guess"}):
        got = plane.client.get(f"{base}/assignment", params={"attempt": 1}, headers=headers)
        assert got.status_code == 401
        posted = plane.client.post(
            f"{base}/events", json={"attempt": 1, "events": []}, headers=headers
        )
        assert posted.status_code == 401
    job_dir = plane.server.settings.jobs_dir / "secured"
    journal = (job_dir / "attempt-1" / ".agents" / "algo-1" / "journal.jsonl").read_text()
    with sqlite3.connect(plane.server.settings.db_path) as conn:
        hashes = [r[0] for r in conn.execute("SELECT token_hash FROM hosts WHERE job = 'secured'")]
    assert hashes == [None]  # revoked once the host ended
    assert "TRAINOPS_AGENT_TOKEN" not in journal
