"""Job trees of ended jobs are kept for the newest ``keep_job_trees`` jobs, never while one runs."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from tests.control._harness import control_plane
from trainops._settings import Settings
from trainops.control._settings import ControlSettings

pytestmark = pytest.mark.slow

HANG = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}


def test_old_trees_go_and_running_or_unknown_ones_stay(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    keep_one = dataclasses.replace(settings, control=ControlSettings(keep_job_trees=1))
    stray = keep_one.jobs_dir / "not-a-job" / "attempt-1" / "algo-1"
    stray.mkdir(parents=True)
    with control_plane(keep_one) as plane:
        plane.submit("running", HANG)
        plane.wait_secondary("running", "Training")
        for name in ("first", "second", "third"):
            plane.submit(name, {"FAKE_LINES": "1"})
            plane.wait_ended(name)
            plane.wait_for_hosts_down(name)
        for name in ("running", "first", "second", "third"):
            assert (keep_one.jobs_dir / name / "attempt-1" / ".agents" / "algo-1").is_dir()
        with caplog.at_level(logging.INFO, logger="trainops.control"):
            removed = plane.server.controller.retention.sweep()
        assert sorted(removed) == ["first", "second"]
        assert "removed the job tree of first (ended Completed)" in caplog.text
        assert not (keep_one.jobs_dir / "first").exists()
        assert not (keep_one.jobs_dir / "second").exists()
        assert (keep_one.jobs_dir / "third" / "attempt-1" / ".agents" / "algo-1").is_dir()
        assert (keep_one.jobs_dir / "running" / "attempt-1" / ".agents" / "algo-1").is_dir()
        assert stray.is_dir()
        # The records, logs and history stay in the store.
        assert plane.describe("first")["TrainingJobStatus"] == "Completed"
        assert plane.log_lines("first") == ["algo-1 line 0"]
        plane.stop("running")
        plane.wait_ended("running")
        plane.wait_for_hosts_down("running")
        assert plane.server.controller.retention.sweep() == ["third"]
    assert sorted(p.name for p in keep_one.jobs_dir.iterdir()) == ["not-a-job", "running"]


def test_keeping_none_still_spares_a_running_job(settings: Settings) -> None:
    keep_none = dataclasses.replace(settings, control=ControlSettings(keep_job_trees=0))
    with control_plane(keep_none) as plane:
        plane.submit("busy", HANG)
        plane.wait_secondary("busy", "Training")
        assert plane.server.controller.retention.sweep() == []
        assert (keep_none.jobs_dir / "busy" / "attempt-1" / ".agents" / "algo-1").is_dir()
        plane.stop("busy")
        plane.wait_ended("busy")
        plane.wait_for_hosts_down("busy")
        assert plane.server.controller.retention.sweep() == ["busy"]


def test_the_setting_is_read_from_the_environment(settings: Settings) -> None:
    assert Settings.load({"TRAINOPS_HOME": "/tmp/x"}).keep_job_trees == 20
    loaded = Settings.load({"TRAINOPS_HOME": "/tmp/x", "TRAINOPS_KEEP_JOB_TREES": "3"})
    assert loaded.keep_job_trees == 3
