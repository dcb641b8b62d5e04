"""Scheduling: jobs wait (Pending) instead of oversubscribing, and run together when they fit."""

from __future__ import annotations

import pytest

from tests.control._harness import control_plane
from trainops._settings import LocalCapacity, Settings

pytestmark = pytest.mark.slow

HANG = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}


def _with_cpus(settings: Settings, cpus: int) -> Settings:
    return Settings(home=settings.home, capacity=LocalCapacity(cpus=cpus, memory_mb=64_000, gpus=0))


def test_a_job_waits_pending_until_the_machine_is_free(settings: Settings) -> None:
    with control_plane(_with_cpus(settings, 2)) as plane:
        plane.submit("first", HANG)
        plane.wait_secondary("first", "Training")
        plane.submit("second", {"FAKE_LINES": "2"})
        waiting = plane.wait_secondary("second", "Pending")
        assert waiting["Hosts"] == [] and waiting["TrainingStartTime"] is None
        message = waiting["SecondaryStatusTransitions"][-1]["StatusMessage"]
        assert message == "Waiting for capacity: needs 2 CPUs per host x 1 host; 0 free"
        plane.stop("first")
        first = plane.wait_ended("first")
        second = plane.wait_ended("second")
    assert second["TrainingJobStatus"] == "Completed"
    steps = [t["Status"] for t in second["SecondaryStatusTransitions"]]
    assert steps[:3] == ["Starting", "Pending", "Starting"]
    assert second["TrainingStartTime"] >= first["TrainingEndTime"]


def test_jobs_that_fit_together_run_together(settings: Settings) -> None:
    with control_plane(_with_cpus(settings, 4)) as plane:
        plane.submit("left", HANG)
        plane.submit("right", HANG)
        # Both hang until stopped, so both being in Training at once proves they run together.
        plane.wait_secondary("left", "Training")
        plane.wait_secondary("right", "Training")
        info = plane.client.get("/api/v1/info").json()
        for name in ("left", "right"):
            plane.stop(name)
        ended = [plane.wait_ended(name) for name in ("left", "right")]
    assert info["capacity"] == {"cpus": 4, "memory_mb": 64_000, "gpus": 0}
    assert [j["SecondaryStatus"] for j in ended] == ["Stopped", "Stopped"]
    assert all(
        "Pending" not in [t["Status"] for t in j["SecondaryStatusTransitions"]] for j in ended
    )


def test_a_multi_host_job_waits_for_all_its_hosts(settings: Settings) -> None:
    with control_plane(_with_cpus(settings, 3)) as plane:
        plane.submit("one", HANG, instance_type="ml.m5.xlarge")  # takes all 3 CPUs
        plane.wait_secondary("one", "Training")
        plane.submit("pair", {"FAKE_LINES": "1"}, instance_count=2)
        waiting = plane.wait_secondary("pair", "Pending")
        message = waiting["SecondaryStatusTransitions"][-1]["StatusMessage"]
        assert message == "Waiting for capacity: needs 1 CPU per host x 2 hosts; 0 free"
        plane.stop("one")
        pair = plane.wait_ended("pair")
    assert pair["TrainingJobStatus"] == "Completed"
    assert [h["Host"] for h in pair["Hosts"]] == ["algo-1", "algo-2"]
