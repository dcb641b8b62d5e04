"""Every source of spot interruptions goes the same way (docs/internals/interruption-sources.md).

A source is a way an interruption reaches ``JobController.interrupt``: the API (``trainops chaos
interrupt``), the chaos service playing the spec's ``chaos:`` schedule, or a backend's
``take_preemptions`` (a machine it is losing). Each is run here against a real control plane
with fake agents: the job's every host gets an interrupted stop with a notice, the job shows
Interrupted once, starts again as a new attempt and completes, with the interruption counted.
A source added later gets a row in ``SOURCES``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.control._harness import FAKE_AGENT, ControlPlane, control_plane, wait_for
from trainops._settings import Settings
from trainops.backends import Backend, LocalBackend, Preemption

pytestmark = pytest.mark.slow

NOTICE_S = 2.0
SPOT = {
    "use_spot_instances": True,
    "stopping_condition": {"max_runtime_in_seconds": 300, "max_wait_time_in_seconds": 600},
}


class PreemptingBackend(LocalBackend):
    """The local backend, told by the test that its machine is being reclaimed."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, agent_command=[sys.executable, str(FAKE_AGENT)])
        self._pending: list[Preemption] = []
        self._lock = threading.Lock()

    def reclaim(self, notice: float) -> None:
        with self._lock:
            self._pending.append(Preemption(self.node_name, "spot reclaim", time.time() + notice))

    def take_preemptions(self) -> list[Preemption]:
        with self._lock:
            taken, self._pending = self._pending, []
        return taken


def _by_api(plane: ControlPlane, backend: PreemptingBackend, name: str) -> None:
    del backend
    response = plane.client.post(
        f"/api/v1/jobs/{name}/interrupt", json={"notice_seconds": NOTICE_S}
    )
    assert response.status_code == 202, response.text


def _by_backend(plane: ControlPlane, backend: PreemptingBackend, name: str) -> None:
    del plane, name
    backend.reclaim(NOTICE_S + 0.5)  # the notice is what is left when the monitor hears it


def _by_chaos(plane: ControlPlane, backend: PreemptingBackend, name: str) -> None:
    del plane, backend, name  # the schedule in the spec fires it


SOURCES: dict[str, tuple[dict[str, Any], Callable[[ControlPlane, PreemptingBackend, str], None]]]
SOURCES = {
    "api": ({}, _by_api),
    "backend": ({}, _by_backend),
    "chaos": (
        {"chaos": {"interruptions": 1, "mean_seconds_between": 0.2, "notice_seconds": NOTICE_S}},
        _by_chaos,
    ),
}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_an_interruption_from_any_source_goes_the_same_way(settings: Settings, source: str) -> None:
    extra, fire = SOURCES[source]
    backend = PreemptingBackend(settings)
    env = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}
    with control_plane(settings, backend=backend) as plane:
        plane.submit("spot", env, instance_count=2, **SPOT, **extra)
        wait_for(
            lambda: (
                (job := plane.describe("spot"))["SecondaryStatus"] == "Training"
                or job["Interruptions"]
            ),
            what="Training (or the chaos interruption already)",
        )
        fire(plane, backend, "spot")
        job = plane.wait_ended("spot")
        lines = plane.log_lines("spot")
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    statuses = [t["Status"] for t in job["SecondaryStatusTransitions"]]
    assert statuses.count("Interrupted") == 1 and statuses[-2:] == ["Uploading", "Completed"]
    assert (job["Attempt"], job["Interruptions"]) == (2, 1)
    stops = [line for line in lines if line.startswith("stopping:")]
    assert len(stops) == 2, lines  # every host of the job, not only the one reclaimed
    notices = [float(s.split("(interrupted, ")[1].split(" s notice")[0]) for s in stops]
    assert all(1.0 <= n <= NOTICE_S + 0.5 for n in notices), stops


def test_a_preemption_leaves_on_demand_jobs_to_the_liveness_checks(settings: Settings) -> None:
    backend = PreemptingBackend(settings)
    with control_plane(settings, backend=backend) as plane:
        plane.submit("ondemand", {"FAKE_HANG_ATTEMPTS": "1"})
        plane.wait_secondary("ondemand", "Training")
        backend.reclaim(NOTICE_S)
        plane.submit("marker", {"FAKE_LINES": "0"})
        plane.wait_ended("marker")  # the monitor has ticked past the preemption since
        job = plane.describe("ondemand")
        plane.stop("ondemand")
    assert (job["SecondaryStatus"], job["Interruptions"]) == ("Training", 0)


def test_backends_report_no_preemptions_by_default(settings: Settings) -> None:
    assert LocalBackend(settings).take_preemptions() == []
    assert Backend.take_preemptions is LocalBackend.take_preemptions
