"""CloudWatch Logs on the server's port, driven by botocore's own ``logs`` client: a job's hosts
as streams named as SageMaker names them, GetLogEvents paged to the end both ways with the
tokens the SDKs' tailers use, a running job's log followed live as the SageMaker SDK follows it,
FilterLogEvents across streams, secrets masked, and the service's refusals."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.control._harness import ControlPlane, control_plane
from tests.server.aws._clients import aws_client
from trainops._settings import Settings
from trainops.protocol import AgentEvent, EventKind
from trainops.server.aws import derive_credentials

pytestmark = pytest.mark.slow

GROUP = "/aws/sagemaker/TrainingJobs"


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


def _logs(plane: ControlPlane) -> Any:
    assert plane.server.token is not None
    return aws_client("logs", plane.server.url, derive_credentials(plane.server.token))


def _streams(logs: Any, prefix: str, **keys: Any) -> list[str]:
    answer = logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix=prefix, **keys)
    return [s["logStreamName"] for s in answer["logStreams"]]


def _error(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


def test_hosts_are_streams_paged_to_the_end_both_ways(plane: ControlPlane) -> None:
    plane.submit("paged", {"FAKE_LINES": "7"}, instance_count=2)
    plane.wait_ended("paged")
    logs = _logs(plane)
    names = _streams(logs, "paged/")
    assert [re.sub(r"-\d{10}$", "-<epoch>", n) for n in names] == [
        "paged/algo-1-<epoch>",
        "paged/algo-2-<epoch>",
    ]
    described = logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix="paged/")
    stream = described["logStreams"][0]
    assert stream["firstEventTimestamp"] <= stream["lastEventTimestamp"]
    assert stream["arn"].endswith(f":log-group:{GROUP}:log-stream:{names[0]}")
    # forward from the head, three at a time, until the token repeats (as the tailers stop)
    read, token, tokens = [], None, []
    while True:
        page = logs.get_log_events(
            logGroupName=GROUP, logStreamName=names[0], startFromHead=True, limit=3,
            **({"nextToken": token} if token else {}),
        )  # fmt: skip
        read += [e["message"] for e in page["events"]]
        if page["nextForwardToken"] == token:
            break
        token = page["nextForwardToken"]
        tokens.append(page["nextBackwardToken"])
    assert read == [f"algo-1 line {i}" for i in range(7)]
    # the default reads the tail; the backward tokens page towards the head
    tail = logs.get_log_events(logGroupName=GROUP, logStreamName=names[1], limit=3)
    assert [e["message"] for e in tail["events"]] == [f"algo-2 line {i}" for i in (4, 5, 6)]
    back = logs.get_log_events(
        logGroupName=GROUP, logStreamName=names[1], limit=3, nextToken=tail["nextBackwardToken"]
    )
    assert [e["message"] for e in back["events"]] == [f"algo-2 line {i}" for i in (1, 2, 3)]


def _follow(logs: Any, plane: ControlPlane, job: str) -> list[str]:
    """The job's log as the SageMaker SDK follows one (``Session.logs_for_job``): the streams
    re-listed until there is one per instance, each read from the last time seen, skipping the
    lines already printed at that very millisecond; a last pass once the job has ended."""
    printed: list[str] = []
    positions: dict[str, tuple[int, int]] = {}
    ended = False
    while True:
        for name in _streams(logs, f"{job}/", orderBy="LogStreamName", limit=50):
            start, skip = positions.get(name, (0, 0))
            token = None
            while True:  # GetLogEvents until a page is empty, as the SDK's log_stream does
                keys = {"nextToken": token} if token else {}
                page = logs.get_log_events(
                    logGroupName=GROUP, logStreamName=name, startTime=start,
                    startFromHead=True, **keys,
                )  # fmt: skip
                if not page["events"]:
                    break
                token = page["nextForwardToken"]
                for event in page["events"]:
                    if skip:
                        skip -= 1
                        continue
                    printed.append(event["message"])
                    seen = positions.get(name, (0, 0))
                    same = event["timestamp"] == seen[0]
                    positions[name] = (event["timestamp"], seen[1] + 1 if same else 1)
            start, skip = positions.get(name, (0, 0))
        if ended:
            return printed
        ended = plane.describe(job)["TrainingJobStatus"] in ("Completed", "Failed", "Stopped")


def test_a_running_job_is_followed_live_each_line_once(plane: ControlPlane) -> None:
    plane.submit("live", {"FAKE_LINES": "25", "FAKE_LINE_DELAY": "0.02"})
    printed = _follow(_logs(plane), plane, "live")
    assert printed == [f"algo-1 line {i}" for i in range(25)]


def test_filter_finds_terms_across_streams_a_page_at_a_time(plane: ControlPlane) -> None:
    plane.submit("sought", {"FAKE_LINES": "12"}, instance_count=2)
    plane.wait_ended("sought")
    logs = _logs(plane)
    found, token = [], None
    while True:
        keys = {"nextToken": token} if token else {}
        page = logs.filter_log_events(
            logGroupName=GROUP, logStreamNamePrefix="sought/", filterPattern='"line 1" -algo-2',
            limit=2, **keys,
        )  # fmt: skip
        found += [(e["logStreamName"].split("/")[1][:6], e["message"]) for e in page["events"]]
        token = page.get("nextToken")
        if token is None:
            break
    assert found == [("algo-1", "algo-1 line 1"), ("algo-1", "algo-1 line 10"),
                     ("algo-1", "algo-1 line 11")]  # fmt: skip
    either = logs.filter_log_events(logGroupName=GROUP, filterPattern="?3 ?4")
    assert sorted(e["message"] for e in either["events"]) == [
        "algo-1 line 3", "algo-1 line 4", "algo-2 line 3", "algo-2 line 4",
    ]  # fmt: skip
    names = _streams(logs, "sought/")
    one = logs.filter_log_events(logGroupName=GROUP, logStreamNames=names[1:])
    assert {e["logStreamName"] for e in one["events"]} == {names[1]}


def test_secrets_are_masked_and_a_pattern_cannot_find_them(plane: ControlPlane) -> None:
    plane.submit("secretive", {"FAKE_LINES": "0", "HF_AUTH": "hf-auth-value"})
    plane.wait_ended("secretive")
    store = plane.server.controller.store
    seq = store.hosts("secretive", 1)[0].acked_seq + 1  # the next event the host would send
    said = AgentEvent(seq, 2_000_000_000.0, EventKind.LOG, {"line": "token hf-auth-value ok"})
    ingested = store.ingest("secretive", "algo-1", 1, [said])
    assert ingested is not None and ingested.accepted
    logs = _logs(plane)
    (name,) = _streams(logs, "secretive")
    events = logs.get_log_events(logGroupName=GROUP, logStreamName=name)["events"]
    assert [e["message"] for e in events] == ["token *** ok"]
    probe = logs.filter_log_events(logGroupName=GROUP, filterPattern="hf-auth-value")
    assert probe["events"] == []


def test_the_services_refusals(plane: ControlPlane) -> None:
    plane.submit("refused", {"FAKE_LINES": "1"})
    plane.wait_ended("refused")
    logs = _logs(plane)
    (name,) = _streams(logs, "refused/")
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        ("get_log_events", {"logGroupName": "/aws/other", "logStreamName": name},
         "ResourceNotFoundException", "The specified log group does not exist."),
        ("get_log_events", {"logGroupName": GROUP, "logStreamName": "refused/algo-9-1"},
         "ResourceNotFoundException", "The specified log stream does not exist."),
        ("get_log_events", {"logGroupName": GROUP, "logStreamName": name, "nextToken": "f/1"},
         "InvalidParameterException", "The specified nextToken is invalid."),
        ("get_log_events", {"logGroupName": GROUP, "logStreamName": name, "limit": 10**9},
         "ValidationException", "Member must have value less than or equal to 10000"),
        ("get_log_events", {"logStreamName": name},
         "InvalidParameterException", "Should provide either logGroupName or"),
        ("describe_log_streams",
         {"logGroupName": GROUP, "logStreamNamePrefix": "r", "orderBy": "LastEventTime"},
         "InvalidParameterException", "Cannot order by LastEventTime with a logStreamNamePrefix"),
        ("describe_log_streams", {"logGroupName": GROUP, "nextToken": "forged"},
         "InvalidParameterException", "The specified nextToken is invalid."),
        ("filter_log_events", {"logGroupName": GROUP, "filterPattern": "{ $.x = 1 }"},
         "InvalidParameterException", "simple terms only"),
    ]  # fmt: skip
    for operation, keys, code, words in cases:
        with pytest.raises(ClientError) as caught:
            getattr(logs, operation)(**keys)
        found = _error(caught)
        assert found[0] == code and words in found[1], (operation, keys, found)
    with pytest.raises(ClientError) as caught:  # past SQLite's integers
        logs.get_log_events(logGroupName=GROUP, logStreamName=name, nextToken="f/" + "9" * 40)
    assert _error(caught)[0] == "InvalidParameterException"
    huge = logs.get_log_events(logGroupName=GROUP, logStreamName=name, startTime=10**30)
    assert huge["events"] == []
    # a forged token well formed names only a place in the stream it is sent with
    forged = "f/" + "00" + "9" * 18 + "0" * 20
    page = logs.get_log_events(logGroupName=GROUP, logStreamName=name, nextToken=forged)
    assert [e["message"] for e in page["events"]] == ["algo-1 line 0"]
