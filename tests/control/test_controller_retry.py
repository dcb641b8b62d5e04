"""Internal failures: a lost agent or an InternalError exit retries the job while attempts remain."""

from __future__ import annotations

import os
import signal
import socket
import sys

import pytest

from tests.control._harness import control_plane, wait_for
from trainops._settings import Settings
from trainops.backends import LocalBackend
from trainops.backends._local import agent_process

pytestmark = pytest.mark.slow


def _statuses(job: dict[str, object]) -> list[str]:
    transitions = job["SecondaryStatusTransitions"]
    assert isinstance(transitions, list)
    return [t["Status"] for t in transitions]


def test_a_killed_agent_is_retried_and_the_job_completes(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "2"}
    with control_plane(settings) as plane:
        plane.submit("retried", env, retry_strategy={"maximum_retry_attempts": 1})
        plane.wait_secondary("retried", "Training")
        [first] = plane.agent_handles("retried")
        pid, _ = agent_process(first)  # the local backend's handle
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        job = plane.wait_ended("retried")
        lines = plane.log_lines("retried")
    assert (job["TrainingJobStatus"], job["Attempt"]) == ("Completed", 2), job["FailureReason"]
    statuses = _statuses(job)
    assert statuses[statuses.index("Restarting") :] == [
        "Restarting",
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    restarting = job["SecondaryStatusTransitions"][statuses.index("Restarting")]
    assert restarting["StatusMessage"].startswith("Retrying after internal error: ")
    assert restarting["StatusMessage"].endswith("; attempt 2 of 2")
    node = socket.gethostname()  # the local backend's one machine
    assert job["Hosts"] == [
        {"Host": "algo-1", "Status": "Completed", "ExitCode": 0, "Attempt": 2, "Node": node}
    ]
    assert lines.count("algo-1 line 0") == 2  # one per attempt, both kept
    assert (settings.jobs_dir / "retried" / "attempt-2" / ".agents" / "algo-1").is_dir()


def test_a_crash_without_retries_left_fails_the_job(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("crashed", {"FAKE_CRASH_ATTEMPTS": "1"})
        job = plane.wait_ended("crashed")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Failed", "Failed")
    assert job["FailureReason"].startswith("InternalServerError: the host agent of algo-1")
    assert "Restarting" not in _statuses(job)


def test_an_agent_that_cannot_start_fails_the_job_with_its_output(settings: Settings) -> None:
    broken = [sys.executable, "-c", "import sys; sys.exit('agent cannot start: no module foo')"]
    with control_plane(settings, agent_command=broken) as plane:
        plane.submit("unstartable", retry_strategy={"maximum_retry_attempts": 1})
        job = plane.wait_ended("unstartable")
    assert (job["TrainingJobStatus"], job["Attempt"]) == ("Failed", 2)
    assert job["FailureReason"].startswith("InternalServerError: the host agent of algo-1 ended")
    assert job["FailureReason"].endswith("its last output: agent cannot start: no module foo")
    assert _statuses(job).count("Restarting") == 1


def test_an_internal_error_exit_is_retried(settings: Settings) -> None:
    env = {"FAKE_INTERNAL_ATTEMPTS": "1,2"}
    with control_plane(settings) as plane:
        plane.submit("flaky", env, retry_strategy={"maximum_retry_attempts": 2})
        job = plane.wait_ended("flaky")
    assert (job["TrainingJobStatus"], job["Attempt"]) == ("Completed", 3)
    messages = [
        t["StatusMessage"] for t in job["SecondaryStatusTransitions"] if t["Status"] == "Restarting"
    ]
    assert messages == [
        "Retrying after internal error: agent broke down; attempt 2 of 3",
        "Retrying after internal error: agent broke down; attempt 3 of 3",
    ]


def test_an_agent_that_ignores_a_stop_is_killed(settings: Settings) -> None:
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_IGNORE_STOP": "1", "FAKE_LINES": "1"}
    with control_plane(settings) as plane:
        plane.submit("stubborn", env, stopping_condition={"grace_period_in_seconds": 0})
        plane.wait_secondary("stubborn", "Training")
        [handle] = plane.agent_handles("stubborn")
        plane.stop("stubborn")
        job = plane.wait_ended("stubborn")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    backend = LocalBackend(settings)
    wait_for(lambda: not backend.is_alive(handle), 10, "the stubborn agent gone")
