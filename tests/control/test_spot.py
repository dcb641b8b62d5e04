"""Managed spot through the real control plane (fake agents): each status path of an
interruption, max wait, retries beside interruptions, billable against training seconds."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.control._harness import ControlPlane, control_plane
from trainops._settings import Settings
from trainops.cli import main

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
        anonymous = httpx.post(f"{plane.server.url}/api/v1/jobs/spotty/interrupt", json={})
        assert anonymous.status_code == 401  # the API token's holder only (not a job's script)
        code, message = refused("spotty", {"hosts": "algo-1"})
        assert code == 400 and "hosts" in message
        code, message = refused("spotty", {"message": "x" * 501})
        assert code == 400 and "message" in message
        # Still running and never interrupted by any of the above.
        assert plane.describe("spotty")["Interruptions"] == 0
        # A message is one line of printable text in the job's status: no terminal escapes.
        hostile = {"message": "evil\x1b[2J\nsecond\tline\x00", "notice_seconds": 1}
        answer = interrupt(plane, "spotty", **hostile)
        shown = answer["SecondaryStatusTransitions"][-1]["StatusMessage"]
        assert "evil [2J second line (API request)" in shown, shown
        assert not any(not c.isprintable() for c in shown)
        plane.stop("spotty")
        plane.wait_ended("spotty")


def chaos_spec(**plan: Any) -> dict[str, Any]:
    return spot(chaos={"seed": 11, "notice_seconds": 1} | plan)


def test_the_chaos_schedule_interrupts_a_job_as_often_as_it_says(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1,2", "FAKE_LINES": "1"}
    plan = {"interruptions": 2, "mean_seconds_between": 0.3, "capacity_gap_seconds": [0.2, 0.6]}
    with control_plane(settings) as plane:
        plane.submit("rehearsed", env, instance_count=2, **chaos_spec(**plan))
        job = plane.wait_ended("rehearsed")
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert (job["Attempt"], job["Interruptions"]) == (3, 2)
    messages = [t["StatusMessage"] for t in job["SecondaryStatusTransitions"]]
    for index in (1, 2):
        assert sum(f"chaos interruption {index} of 2 (seed 11)" in m for m in messages) == 1
    assert statuses(job).count("Pending") == 2


def test_a_restarted_control_plane_carries_the_wait_and_the_schedule_on(
    settings: Settings,
) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1,2", "FAKE_LINES": "1"}
    plan = {"interruptions": 2, "mean_seconds_between": 0.3, "capacity_gap_seconds": [4, 4]}
    with control_plane(settings) as plane:
        plane.submit("durable", env, **chaos_spec(**plan))
        plane.wait_secondary("durable", "Pending")
        waiting = plane.describe("durable")
    with control_plane(settings) as plane:  # mid-gap: the wait goes on, it does not restart
        job = plane.wait_ended("durable")
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert (job["Attempt"], job["Interruptions"]) == (3, 2)
    transitions = job["SecondaryStatusTransitions"]
    assert statuses(job).count("Pending") == 2  # one per interruption, none added by the restart
    first_pending = next(t for t in transitions if t["Status"] == "Pending")
    assert first_pending == waiting["SecondaryStatusTransitions"][-1] | {
        "EndTime": first_pending["EndTime"]
    }


def test_a_restart_while_interrupted_still_stops_and_resumes_the_job(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}
    with control_plane(settings) as plane:
        plane.submit("midway", env, instance_count=2, **spot())
        plane.wait_secondary("midway", "Training")
        interrupt(plane, "midway", notice_seconds=3)
    # No control plane: the agents hear the interruption from the next one.
    with control_plane(settings) as plane:
        job = plane.wait_ended("midway")
        lines = plane.log_lines("midway")
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert statuses(job)[2:5] == ["Training", "Interrupted", "Starting"]
    assert sum("(interrupted, 3 s notice)" in line for line in lines) == 2


def test_trainops_chaos_interrupt(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}
    with control_plane(settings) as plane:
        plane.submit("cli-spot", env, instance_count=2, **spot())
        plane.wait_secondary("cli-spot", "Training")
        command = ["chaos", "interrupt", "cli-sp", "--host", "algo-1", "--gap", "1.5"]
        assert main([*command, "--notice", "4"]) == 0
        said = capsys.readouterr().out
        job = plane.wait_ended("cli-spot")
        assert main(["chaos", "interrupt", "cli-spot", "--host", "algo-7"]) == 2
        refused = capsys.readouterr().err
    assert said.startswith("cli-spot: Interrupted: Spot interruption of algo-1:"), said
    assert "4 s notice" in said and "(API request)" in said
    assert statuses(job)[3:5] == ["Interrupted", "Pending"]
    assert refused == "trainops: error: job 'cli-spot' has already ended (Completed)\n"


def test_max_runtime_counts_the_running_seconds_only(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1,2"}
    with control_plane(settings) as plane:
        plane.submit("ran", env, **spot(max_runtime=3))
        plane.wait_secondary("ran", "Training")
        interrupt(plane, "ran", capacity_gap_seconds=4, notice_seconds=1)
        job = plane.wait_ended("ran")
    # The gap is no run time: the job runs again after it, then stops at 3 s of running.
    assert job["SecondaryStatus"] == "MaxRuntimeExceeded"
    assert statuses(job)[3:10] == [
        "Interrupted", "Pending", "Starting", "Downloading", "Training", "Stopping",
        "MaxRuntimeExceeded",
    ]  # fmt: skip
    assert job["Attempt"] == 2
    assert job["BillableTimeInSeconds"] <= 4 < job["TrainingTimeInSeconds"]


def test_a_spot_job_without_a_checkpoint_is_warned_of_the_cost(settings: Settings) -> None:
    with control_plane(settings) as plane:
        bare = plane.submit("bare", {"FAKE_LINES": "0"}, **spot())
        kept = plane.submit("kept", {"FAKE_LINES": "0"}, checkpoint={"uri": "ckpt/"}, **spot())
        plane.wait_ended("bare")
        plane.wait_ended("kept")
    [warning] = [w for w in bare["Warnings"] if "checkpoint" in w]
    assert "restarts the script from scratch" in warning
    assert not [w for w in kept["Warnings"] if "checkpoint" in w]
