"""A control plane that stops while jobs run: the next one on the same home loses no record."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time

import pytest

from tests.control._harness import control_plane, wait_for
from trainops._settings import Settings
from trainops.backends._local import agent_process
from trainops.control._settings import ControlSettings
from trainops.protocol import AGENT_PROCESS_FILE
from trainops.store import HostState, MetadataStore

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


def _forget_launch(settings: Settings, job: str) -> None:
    """Make the store what a server SIGKILLed in the middle of a launch leaves: the host made
    (its token hash, its directories) but its agent's handle never recorded."""
    store = MetadataStore(settings.db_path)
    try:
        store.update_host(job, "algo-1", 1, state=HostState.LAUNCHING, handle=None, node=None)
    finally:
        store.close()


def test_an_agent_whose_launch_was_never_recorded_is_found_by_the_next_server(
    settings: Settings,
) -> None:
    env = {"FAKE_LINES": str(LINES), "FAKE_LINE_DELAY": "0.05"}
    with control_plane(settings) as plane:
        plane.submit("unrecorded", env)
        wait_for(lambda: len(plane.log_lines("unrecorded")) >= 3, what="first lines")
        [handle] = plane.agent_handles("unrecorded")
    _forget_launch(settings, "unrecorded")
    with control_plane(settings) as plane:
        job = plane.wait_ended("unrecorded")
        lines = plane.log_lines("unrecorded")
        [found] = plane.agent_handles("unrecorded")
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert lines == [f"algo-1 line {i}" for i in range(LINES)]
    assert agent_process(found) == agent_process(handle)


def test_a_launch_cut_short_before_its_agent_started_is_lost_after_the_heartbeat_timeout(
    settings: Settings,
) -> None:
    with control_plane(settings) as plane:
        plane.submit("stillborn", {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "0"})
        plane.wait_secondary("stillborn", "Training")
        [handle] = plane.agent_handles("stillborn")
    pid, _ = agent_process(handle)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    state_dir = settings.jobs_dir / "stillborn" / "attempt-1" / ".agents" / "algo-1"
    for left in (AGENT_PROCESS_FILE, "journal.jsonl"):  # as if no agent had ever run
        (state_dir / left).unlink()
    _forget_launch(settings, "stillborn")
    quick = dataclasses.replace(settings, control=ControlSettings(heartbeat_timeout=5))
    with control_plane(quick) as plane:
        assert plane.describe("stillborn")["TrainingJobStatus"] == "InProgress"
        job = plane.wait_ended("stillborn", timeout=30)
    assert job["TrainingJobStatus"] == "Failed"
    assert "was being started when the control plane stopped" in job["FailureReason"], job
    assert "nothing of it was heard for 5 s after" in job["FailureReason"], job


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
