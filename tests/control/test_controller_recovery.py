"""A control plane that stops while jobs run: the next one on the same home loses no record."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from tests.control._harness import control_plane, wait_for
from trainops._settings import Settings
from trainops.backends._local import agent_process

pytestmark = pytest.mark.slow

LINES = 40
DOWNTIME_S = 4.0


def test_a_running_agent_is_adopted_by_the_next_server(settings: Settings) -> None:
    env = {"FAKE_LINES": str(LINES), "FAKE_LINE_DELAY": "0.05"}
    with control_plane(settings) as plane:
        plane.submit("survivor", env)
        wait_for(lambda: len(plane.log_lines("survivor")) >= 3, what="first lines")
        [handle] = plane.agent_handles("survivor")
    assert not settings.server_file.exists()
    # The agent works on without a control plane, journaling and retrying.
    with control_plane(settings) as plane:
        job = plane.wait_ended("survivor")
        lines = plane.log_lines("survivor")
        metrics = plane.client.get("/api/v1/jobs/survivor/metrics", params={"name": "step"}).json()
        [adopted] = plane.agent_handles("survivor")
    assert adopted == handle
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert lines == [f"algo-1 line {i}" for i in range(LINES)]
    assert [m["Value"] for m in metrics["metrics"]] == [float(i) for i in range(LINES)]
    assert {m["MetricName"]: m["Value"] for m in job["FinalMetricDataList"]}["step"] == LINES - 1


def test_an_agent_that_ended_while_no_server_ran_is_read_from_its_journal(
    settings: Settings,
) -> None:
    env = {"FAKE_LINES": str(LINES), "FAKE_LINE_DELAY": "0.02"}
    with control_plane(settings) as plane:
        plane.submit("orphan", env)
        plane.wait_secondary("orphan", "Training")
        [handle] = plane.agent_handles("orphan")
    journal = settings.jobs_dir / "orphan" / "attempt-1" / ".agents" / "algo-1" / "journal.jsonl"
    wait_for(lambda: '"kind": "exit"' in journal.read_text(), what="the exit in the journal")
    pid, _ = agent_process(handle)  # the local backend's handle
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # it would retry for a while; make it end unheard
    time.sleep(DOWNTIME_S)  # the job is over; no server runs
    with control_plane(settings) as plane:
        job = plane.wait_ended("orphan")
        lines = plane.log_lines("orphan")
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert lines == [f"algo-1 line {i}" for i in range(LINES)]
    journaled = [json.loads(line)["seq"] for line in journal.read_text().splitlines()]
    assert journaled == list(range(1, len(journaled) + 1))
    # The agent's own end time is the job's: the downtime is not billed.
    assert job["TrainingTimeInSeconds"] < DOWNTIME_S
    assert job["BillableTimeInSeconds"] == job["TrainingTimeInSeconds"]


def test_a_queued_job_is_placed_by_the_next_server(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("blocker", {"FAKE_HANG_ATTEMPTS": "1"}, instance_type="ml.m5.xlarge")
        plane.wait_secondary("blocker", "Training")
        plane.submit("queued", {"FAKE_LINES": "1"})
        plane.wait_secondary("queued", "Pending")
    with control_plane(settings) as plane:
        # The adopted blocker still holds the whole machine, so the queue is kept.
        assert plane.describe("queued")["SecondaryStatus"] == "Pending"
        plane.stop("blocker")
        job = plane.wait_ended("queued")
    assert job["TrainingJobStatus"] == "Completed"
