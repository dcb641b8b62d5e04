"""Managed spot through the real control plane (fake agents): each status path of an
interruption, max wait, retries beside interruptions, billable against training seconds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.control._harness import ControlPlane, control_plane, wait_for
from trainops._settings import Settings

pytestmark = pytest.mark.slow


def spot(max_wait: int = 600, max_runtime: int = 300, **fields: Any) -> dict[str, Any]:
    stopping = {"max_runtime_in_seconds": max_runtime, "max_wait_time_in_seconds": max_wait}
    return {"use_spot_instances": True, "stopping_condition": stopping} | fields


def statuses(job: dict[str, Any]) -> list[str]:
    return [t["Status"] for t in job["SecondaryStatusTransitions"]]


def interrupt(plane: ControlPlane, name: str, **body: Any) -> dict[str, Any]:
    response = plane.client.post(f"/api/v1/jobs/{name}/interrupt", json=body)
    assert response.status_code == 202, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_an_interrupted_job_restarts_whole_and_completes(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}
    with control_plane(settings) as plane:
        plane.submit("spot", env, instance_count=2, **spot())
        plane.wait_secondary("spot", "Training")
        answer = interrupt(plane, "spot", hosts=["algo-2"], notice_seconds=7)
        job = plane.wait_ended("spot")
        lines = plane.log_lines("spot")
    assert answer["SecondaryStatus"] == "Interrupted"
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert statuses(job) == [
        "Starting", "Downloading", "Training", "Interrupted",
        "Starting", "Downloading", "Training", "Uploading", "Completed",
    ]  # fmt: skip
    interrupted = job["SecondaryStatusTransitions"][3]["StatusMessage"]
    assert "algo-2" in interrupted and "7 s notice" in interrupted
    # One host reclaimed stops the whole job, each host with the interruption's notice.
    stops = [line for line in lines if line.startswith("stopping:")]
    assert len(stops) == 2 and all("(interrupted, 7 s notice)" in s for s in stops), lines
    assert (job["Attempt"], job["Interruptions"], job["EnableManagedSpotTraining"]) == (2, 1, True)
    assert job["BillableTimeInSeconds"] <= job["TrainingTimeInSeconds"]


def test_a_capacity_gap_waits_in_pending_and_is_not_billed(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}
    with control_plane(settings) as plane:
        plane.submit("gap", env, **spot())
        plane.wait_secondary("gap", "Training")
        interrupt(plane, "gap", capacity_gap_seconds=4, notice_seconds=1)
        pending = plane.wait_secondary("gap", "Pending")
        job = plane.wait_ended("gap")
    assert pending["SecondaryStatusTransitions"][-1]["StatusMessage"].startswith(
        "Waiting for spot capacity"
    )
    assert statuses(job)[3:6] == ["Interrupted", "Pending", "Starting"]
    assert job["TrainingJobStatus"] == "Completed"
    # The gap (4 s) is training time but not billable time; savings as the SDK prints them.
    training, billable = job["TrainingTimeInSeconds"], job["BillableTimeInSeconds"]
    assert training - billable >= 3, (training, billable)
    assert job["ManagedSpotTrainingSavings"] == round((1 - billable / training) * 100, 1)


def test_max_wait_ends_an_interrupted_job_stopped(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1,2"}
    with control_plane(settings) as plane:
        plane.submit("waited", env, **spot(max_wait=6, max_runtime=5))
        plane.wait_secondary("waited", "Training")
        interrupt(plane, "waited", capacity_gap_seconds=600, notice_seconds=1)
        job = plane.wait_ended("waited")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    assert statuses(job)[-4:] == ["Interrupted", "Pending", "Stopping", "MaxWaitTimeExceeded"]
    assert job["StoppingCondition"]["MaxWaitTimeInSeconds"] == 6


def test_a_spot_job_never_placed_ends_max_wait_exceeded(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("blocker", {"FAKE_HANG_ATTEMPTS": "1"}, instance_type="ml.m5.xlarge")
        plane.wait_secondary("blocker", "Training")
        plane.submit("starved", {}, **spot(max_wait=2, max_runtime=1))
        job = plane.wait_ended("starved")
        plane.stop("blocker")
    assert statuses(job) == ["Starting", "Pending", "Stopping", "MaxWaitTimeExceeded"]
    assert (job["BillableTimeInSeconds"], job["TrainingTimeInSeconds"]) == (0, 0)


def test_an_interruption_uses_no_retry(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_INTERNAL_ATTEMPTS": "2", "FAKE_LINES": "1"}
    retry = {"maximum_retry_attempts": 1}
    with control_plane(settings) as plane:
        plane.submit("retried", env, retry_strategy=retry, **spot())
        plane.submit("exhausted", env, **spot())
        for name in ("retried", "exhausted"):
            plane.wait_secondary(name, "Training")
            interrupt(plane, name, notice_seconds=1)
        retried, exhausted = plane.wait_ended("retried"), plane.wait_ended("exhausted")
    assert retried["TrainingJobStatus"] == "Completed", retried["FailureReason"]
    assert (retried["Attempt"], retried["Interruptions"]) == (3, 1)
    assert "Restarting" in statuses(retried)
    assert exhausted["TrainingJobStatus"] == "Failed"
    assert exhausted["FailureReason"].startswith("InternalServerError: ")


def test_interruptions_refused_with_the_reason(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("plain", {"FAKE_HANG_ATTEMPTS": "1"})
        plane.submit("spotty", {"FAKE_HANG_ATTEMPTS": "1"}, **spot())
        plane.wait_secondary("plain", "Training")
        plane.wait_secondary("spotty", "Training")
        post = plane.client.post

        def refused(name: str, body: dict[str, Any]) -> tuple[int, str]:
            response = post(f"/api/v1/jobs/{name}/interrupt", json=body)
            return response.status_code, str(response.json()["detail"])

        code, message = refused("plain", {})
        assert code == 400 and "not a spot job" in message
        code, message = refused("spotty", {"hosts": ["algo-9"]})
        assert code == 400 and "no host 'algo-9'" in message and "algo-1" in message
        code, message = refused("spotty", {"hosts": ["../../etc"]})
        assert code == 400 and "no host" in message
        code, message = refused("spotty", {"capacity_gap_seconds": -1})
        assert code == 400 and "capacity_gap_seconds" in message
        code, message = refused("spotty", {"notice_seconds": 1e300})
        assert code == 400 and "notice_seconds" in message
        code, message = refused("spotty", {"surprise": 1})
        assert code == 400 and "surprise" in message
        assert refused("nosuchjob", {})[0] == 404
        plane.stop("plain")
        plane.wait_ended("plain")
        code, message = refused("plain", {})
        assert code == 409 and "ended" in message
        # Still running and never interrupted by any of the above.
        assert plane.describe("spotty")["Interruptions"] == 0
        plane.stop("spotty")
        wait_for(lambda: plane.describe("spotty")["TrainingJobStatus"] == "Stopped")
