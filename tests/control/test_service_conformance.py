"""The service contract, for every service registered in ``SERVICES``.

Parametrized over ``SERVICES.names()`` when the module is collected, after the packages that
register the built-in services are imported (as the server imports them): a service registered
anywhere, by trainops or a plugin, runs through every test here without a line added. What
every service must do, whatever it is for:

- its factory takes a :class:`ServiceContext` and makes a :class:`ControlService` named as it
  is registered (or declines with None), with no period or a positive one;
- it hears a job in every state a job passes through (running, each way of ending, a job with
  every built-in rule and no profiler data) and is ticked and closed without raising;
- beside a real control plane it runs on its own thread while a job runs to the end, and that
  thread is gone once the control plane has closed.

``test_a_newly_registered_service_is_run_through_the_suite`` shows the pick-up: it runs this
suite in a child pytest with a plugin that registers two throwaway services, one conforming and
one that raises, and sees the first pass and the second fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import trainops.report
import trainops.rules
from tests.control._harness import control_plane, wait_for
from trainops._settings import Settings
from trainops.control.services import SERVICES, ControlService, ServiceContext
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore

assert trainops.report and trainops.rules  # imported for the services they register

NAMES = SERVICES.names()
_ROOT = Path(__file__).resolve().parents[2]
_EVERY_RULE = ["ProfilerReport", "LowGPUUtilization", "StepOutlier", "OverallSystemUsage"]
# (status, secondary status) of each way a job ends.
_ENDINGS = [("Completed", "Completed"), ("Failed", "Failed"), ("Stopped", "Stopped")]


class Plane:
    """A real store, a fixed clock and the stops a service asked for."""

    def __init__(self, home: Path) -> None:
        self.store = MetadataStore(home / "trainops.db")
        self.stops: list[tuple[str, str]] = []
        self.now = 1_700_000_000.0
        self.output = (home / "objects").as_uri()
        self.context = ServiceContext(self.store, Settings(home=home), self._stop, lambda: self.now)

    def _stop(self, name: str, message: str) -> bool:
        self.stops.append((name, message))
        return False

    def running(self, name: str, rules: list[str]) -> JobRecord:
        spec = JobSpec(entry_point="train.py", rules=rules).view()
        return self.store.create_job(
            name=name,
            spec=spec,
            code_uri="file:///code.tar.gz",
            output_prefix=f"{self.output}/{name}",
            max_attempts=1,
            status="InProgress",
            secondary_status="Training",
            message="training",
            now=self.now,
        )

    def ended(self, name: str, status: str, secondary: str) -> JobRecord:
        self.now += 1
        return self.store.set_secondary(
            name,
            secondary,
            "ended",
            self.now,
            final=True,
            status=status,
            training_end_time=self.now,
        )


@pytest.fixture
def plane(trainops_home: Path) -> Iterator[Plane]:
    made = Plane(trainops_home)
    yield made
    made.store.close()


def _made(name: str, plane: Plane) -> ControlService | None:
    return SERVICES.lookup(name)(plane.context)


@pytest.mark.parametrize("name", NAMES)
def test_the_factory_makes_a_service_named_as_registered_or_declines(
    name: str, plane: Plane
) -> None:
    service = _made(name, plane)
    if service is None:
        return
    assert isinstance(service, ControlService)
    assert service.name == name, "name the service as it is registered (threads, logs, lookups)"
    assert service.period is None or service.period > 0
    service.close()


@pytest.mark.parametrize("name", NAMES)
def test_it_hears_every_state_of_a_job_is_ticked_and_closes(name: str, plane: Plane) -> None:
    service = _made(name, plane)
    if service is None:
        pytest.skip(f"{name} declines with default settings")
    for i, (status, secondary) in enumerate(_ENDINGS):
        for rules in ([], _EVERY_RULE):
            job = f"job-{i}-{len(rules)}"
            service.job_changed(plane.running(job, rules))
            service.tick()
            service.job_changed(plane.ended(job, status, secondary))
            service.tick()
    service.job_changed(plane.running("still-running", _EVERY_RULE))
    service.tick()
    service.close()
    assert all(job != "still-running" for job, _ in plane.stops), plane.stops


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_it_runs_on_its_own_thread_beside_a_control_plane(name: str, settings: Settings) -> None:
    thread = f"trainops-service-{name}"
    with control_plane(settings) as running:
        if running.server.controller.services.get(name) is None:
            pytest.skip(f"{name} declines with default settings")
        assert any(t.name == thread for t in threading.enumerate())
        running.submit("quick", {"FAKE_LINES": "1"})
        assert running.wait_ended("quick")["TrainingJobStatus"] == "Completed"
    wait_for(lambda: all(t.name != thread for t in threading.enumerate()), 15, f"{thread} ended")


def test_a_newly_registered_service_is_run_through_the_suite() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            __file__,
            "-p",
            "tests.control._throwaway_services",
            "-p",
            "no:cacheprovider",
            "-m",
            "not slow",
            "-k",
            "throwaway",
            "-q",
            "-rA",
        ],
        cwd=_ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out  # some tests failed: the broken one's
    for test in (
        "test_the_factory_makes_a_service_named_as_registered_or_declines",
        "test_it_hears_every_state_of_a_job_is_ticked_and_closes",
    ):
        assert f"PASSED tests/control/test_service_conformance.py::{test}[throwaway-good]" in out
    failed = "FAILED tests/control/test_service_conformance.py::"
    assert (
        f"{failed}test_it_hears_every_state_of_a_job_is_ticked_and_closes[throwaway-broken]" in out
    )
    assert "a throwaway service's bug" in out
