"""The scheduler's cost does not grow with the jobs that wait: behaviour, not timing.

A monitor tick reads no record of a job that waits for capacity, a scheduler pass reads the
oldest waiting job of each need only, and waiting jobs still start (first fit, in submission
order) as soon as capacity frees, with no tick walking them. Store statements are counted on the
store's own connection (SQLite's trace callback).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.control._harness import code_uri, control_plane, fake_backend
from trainops._settings import LocalCapacity, Settings
from trainops.backends import HostPlacement, LocalBackend
from trainops.catalog import InstanceType, get_instance_type
from trainops.control import JobController
from trainops.spec import JobSpec
from trainops.store import MetadataStore

HANG = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}


def _with_cpus(settings: Settings, cpus: int) -> Settings:
    return Settings(home=settings.home, capacity=LocalCapacity(cpus=cpus, memory_mb=64_000, gpus=0))


@contextmanager
def _controller(settings: Settings) -> Iterator[JobController]:
    """A controller whose threads never run: the test drives its passes itself."""
    store = MetadataStore(settings.db_path)
    controller = JobController(settings, store, fake_backend(settings))
    try:
        yield controller
    finally:
        store.close()


def _statements(store: MetadataStore, action: Callable[[], None]) -> list[str]:
    """The SQL statements ``action`` runs on ``store``'s connection."""
    seen: list[str] = []
    connection = store._conn  # the one connection every store method uses
    connection.set_trace_callback(seen.append)
    try:
        action()
    finally:
        connection.set_trace_callback(None)
    return seen


def _submit(controller: JobController, names: list[str], code: str) -> None:
    spec = JobSpec.model_validate({"entry_point": "train.py", "instance_type": "ml.m5.large"})
    for name in names:
        controller.submit(name, spec, code)


def test_a_tick_and_a_pass_cost_the_same_with_ten_or_a_thousand_jobs_waiting(
    settings: Settings,
) -> None:
    settings = _with_cpus(settings, 2)
    with _controller(settings) as controller:
        # Another job holds the whole machine: every job submitted waits.
        controller.backend.reserve("holder", get_instance_type("ml.m5.large"), 1)
        code = code_uri(settings)
        _submit(controller, [f"w{i}" for i in range(10)], code)
        controller.placement.place_waiting()
        few_tick = _statements(controller.store, controller.monitor.tick)
        few_pass = _statements(controller.store, controller.placement.place_waiting)
        _submit(controller, [f"w{i}" for i in range(10, 1000)], code)
        controller.placement.place_waiting()  # tells the new ones they wait
        many_tick = _statements(controller.store, controller.monitor.tick)
        many_pass = _statements(controller.store, controller.placement.place_waiting)
        waiting = [controller.store.get_job(f"w{i}") for i in range(1000)]
    assert many_tick == few_tick
    assert not any("FROM jobs WHERE name" in sql for sql in many_tick)
    assert many_pass == few_pass and len(many_pass) <= 4  # the oldest job, its hosts
    assert {job.secondary_status for job in waiting if job is not None} == {"Pending"}


class _AskedBackend(LocalBackend):
    """The local backend, noting which jobs the scheduler asked it to place."""

    asked: list[str]

    def reserve(self, job: str, instance: InstanceType, count: int) -> list[HostPlacement]:
        self.asked.append(job)
        return super().reserve(job, instance, count)


@pytest.mark.parametrize("by_need", [True, False])
def test_a_pass_asks_once_per_need_unless_the_backend_must_see_every_job(
    settings: Settings, by_need: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _with_cpus(settings, 2)
    monkeypatch.setattr(_AskedBackend, "fits_by_need", by_need)
    backend = _AskedBackend(settings, agent_command=fake_backend(settings).agent_command)
    backend.asked = []
    store = MetadataStore(settings.db_path)
    try:
        controller = JobController(settings, store, backend)
        backend.reserve("holder", get_instance_type("ml.m5.large"), 1)
        _submit(controller, ["a", "b", "c"], code_uri(settings))
        backend.asked.clear()
        controller.placement.place_waiting()
        states = [store.get_job(name) for name in ("a", "b", "c")]
    finally:
        store.close()
    assert backend.asked == (["a"] if by_need else ["a", "b", "c"])
    assert [job.secondary_status for job in states if job is not None] == ["Pending"] * 3


def test_waiting_jobs_start_when_capacity_frees_without_a_tick(settings: Settings) -> None:
    with control_plane(_with_cpus(settings, 4)) as plane:
        plane.server.controller._monitor.stop()  # no tick from here on
        plane.submit("hold", HANG)  # 2 of the 4 CPUs
        plane.wait_secondary("hold", "Training")
        for i in range(30):  # 4 CPUs each: they wait for "hold"
            plane.submit(f"big{i}", {"FAKE_LINES": "1"}, instance_type="ml.m5.xlarge")
        plane.wait_secondary("big29", "Pending")
        # A later job that fits starts at once, past the waiting ones (first fit).
        plane.submit("small", {"FAKE_LINES": "1"})
        assert plane.wait_ended("small")["TrainingJobStatus"] == "Completed"
        assert plane.describe("big0")["SecondaryStatus"] == "Pending"
        plane.stop("hold")
        first = plane.wait_ended("big0")
        second = plane.wait_ended("big1")
    assert first["TrainingJobStatus"] == second["TrainingJobStatus"] == "Completed"
    assert second["TrainingStartTime"] >= first["TrainingEndTime"]  # one at a time, in order


def test_a_waiting_job_that_is_stopped_never_starts(settings: Settings) -> None:
    with control_plane(_with_cpus(settings, 2)) as plane:
        plane.submit("hold", HANG)
        plane.wait_secondary("hold", "Training")
        plane.submit("gone", {"FAKE_LINES": "1"})
        plane.submit("next", {"FAKE_LINES": "1"})
        plane.wait_secondary("next", "Pending")
        assert plane.stop("gone").status_code == 202
        plane.stop("hold")
        following = plane.wait_ended("next")
        gone = plane.wait_ended("gone")
    assert following["TrainingJobStatus"] == "Completed"
    assert gone["TrainingJobStatus"] == "Stopped" and gone["Hosts"] == []


def test_waiting_jobs_are_found_again_after_a_restart(settings: Settings, tmp_path: Path) -> None:
    settings = _with_cpus(settings, 2)
    with _controller(settings) as controller:
        controller.backend.reserve("holder", get_instance_type("ml.m5.large"), 1)
        _submit(controller, ["a", "b"], code_uri(settings))
        controller.placement.place_waiting()
    with control_plane(settings) as plane:  # a new control plane, with the machine free
        assert plane.wait_ended("a")["TrainingJobStatus"] == "Completed"
        assert plane.wait_ended("b")["TrainingJobStatus"] == "Completed"


pytestmark = pytest.mark.slow
