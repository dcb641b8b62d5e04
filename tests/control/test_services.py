"""The service seam: services registered in SERVICES run beside a real control plane, hear every
job change with the job's current record, are ticked, hear (if they ask) which jobs stored metric
points, coalesced, survive their own exceptions, and may stop a job with a reason of their own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from tests.control._harness import control_plane, wait_for
from trainops._settings import Settings
from trainops.control.services import (
    SERVICES,
    ControlService,
    ServiceContext,
    ServiceHub,
    register_service,
)
from trainops.store import JobRecord

HANG = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}


class Recorder(ControlService):
    """Keeps what it hears; raises on the first change of each job when ``explode``."""

    name = "test-recorder"
    period = 0.1
    metrics_gap = 0.1

    def __init__(self, context: ServiceContext, explode: bool = False) -> None:
        self.context = context
        self.explode = explode
        self.changes: list[tuple[str, str, str]] = []
        self.metrics: list[list[str]] = []
        self.ticks = 0
        self.closed = False
        self._exploded: set[str] = set()

    def tick(self) -> None:
        self.ticks += 1

    def job_changed(self, job: JobRecord) -> None:
        if self.explode and job.name not in self._exploded:
            self._exploded.add(job.name)
            raise RuntimeError("a service's bug")
        self.changes.append((job.name, job.status, job.secondary_status))

    def metrics_stored(self, jobs: list[str]) -> None:
        self.metrics.append(jobs)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def recorders() -> Iterator[list[Recorder]]:
    made: list[Recorder] = []

    def factory(context: ServiceContext) -> Recorder:
        made.append(Recorder(context, explode=len(made) % 2 == 1))
        return made[-1]

    with SERVICES.added("test-recorder", factory), SERVICES.added("test-declines", _declines):
        yield made


def test_register_twice_is_refused(recorders: list[Recorder]) -> None:
    with pytest.raises(ValueError, match="registered already"):
        register_service("test-recorder", lambda context: None)


@pytest.mark.slow
def test_a_service_hears_each_job_change_and_is_ticked(
    settings: Settings, recorders: list[Recorder]
) -> None:
    with control_plane(settings) as plane:
        [service] = recorders
        plane.submit("quick", {"FAKE_LINES": "1"})
        plane.wait_ended("quick")
        wait_for(lambda: any(s == "Completed" for _, s, _ in service.changes), what="Completed")
        statuses = [status for name, status, _ in service.changes if name == "quick"]
        assert statuses[0] == "InProgress" and statuses[-1] == "Completed"
        secondaries = [sec for name, _, sec in service.changes if name == "quick"]
        assert "Training" in secondaries or "Completed" in secondaries
        assert ["quick"] in service.metrics  # its fake agent reported step and loss points
        ticks = service.ticks
        wait_for(lambda: service.ticks > ticks + 2, what="more ticks")
        assert plane.server.controller.services.get("test-declines") is None
    assert service.closed


@pytest.mark.slow
def test_a_service_may_stop_a_running_job_with_its_reason(
    settings: Settings, recorders: list[Recorder]
) -> None:
    with control_plane(settings) as plane:
        [service] = recorders
        plane.submit("long", HANG)
        plane.wait_secondary("long", "Training")
        assert service.context.stop_job("long", "Stopped by rule Slow: 3 slow steps")
        ended = plane.wait_ended("long")
        assert ended["TrainingJobStatus"] == "Stopped"
        assert "Stopped by rule Slow" in str(ended)
        assert not service.context.stop_job("long", "again")
        assert not service.context.stop_job("no-such-job", "nothing")


def test_a_raising_service_keeps_hearing() -> None:
    records = {name: _record(name) for name in ("a", "b")}
    service = Recorder(_no_context(), explode=True)
    hub = ServiceHub([service], records.get)
    hub.start()
    try:
        for name in ("a", "b", "a", "b"):
            hub.job_changed(name)
            time.sleep(0.05)
        wait_for(lambda: len(service.changes) >= 2, timeout=10, what="changes after the raise")
    finally:
        hub.close()
    assert {name for name, _, _ in service.changes} == {"a", "b"}


def test_changes_arriving_while_busy_are_coalesced() -> None:
    release = threading.Event()
    heard: list[str] = []

    class Slow(ControlService):
        name = "slow"

        def job_changed(self, job: JobRecord) -> None:
            heard.append(job.name)
            release.wait(10)

    hub = ServiceHub([Slow()], lambda name: _record(name))
    hub.start()
    try:
        hub.job_changed("first")
        wait_for(lambda: heard == ["first"], timeout=10, what="the first change")
        for _ in range(50):
            hub.job_changed("x")
            hub.job_changed("y")
        release.set()
        wait_for(lambda: len(heard) >= 3, timeout=10, what="the coalesced changes")
        time.sleep(0.2)
    finally:
        hub.close()
    assert heard == ["first", "x", "y"]


def test_stored_metrics_are_told_coalesced_and_only_to_the_services_that_ask() -> None:
    """A service with a gap hears each job that stored points; those that arrive while it is busy
    come as one call, each job once. A service without a gap never hears of them."""
    release = threading.Event()
    heard: list[list[str]] = []
    unasked: list[list[str]] = []

    class Judge(ControlService):
        name = "judge"
        metrics_gap = 0.0

        def metrics_stored(self, jobs: list[str]) -> None:
            heard.append(jobs)
            release.wait(10)

    class Other(ControlService):
        name = "other"

        def metrics_stored(self, jobs: list[str]) -> None:
            unasked.append(jobs)

    hub = ServiceHub([Judge(), Other()], lambda name: _record(name))
    hub.start()
    try:
        hub.metrics_stored("first")
        wait_for(lambda: heard == [["first"]], timeout=10, what="the first points")
        for _ in range(50):
            hub.metrics_stored("x")
            hub.metrics_stored("y")
        release.set()
        wait_for(lambda: len(heard) >= 2, timeout=10, what="the coalesced points")
    finally:
        hub.close()
    assert heard == [["first"], ["x", "y"]]
    assert unasked == []


def test_the_services_share_one_read_per_change_and_never_hear_an_older_record() -> None:
    """Three services hear each change; the job is read once per change, not once per service,
    and each service's last record is the one written before the last change."""
    current = {"a": _record("a", secondary="Starting")}
    reads: list[str] = []
    heard: dict[str, list[str]] = {}
    lock = threading.Lock()

    def read(name: str) -> Any:
        with lock:
            reads.append(name)
            return current.get(name)

    class Listener(ControlService):
        def __init__(self, name: str) -> None:
            self.name = name
            heard[name] = []

        def job_changed(self, job: JobRecord) -> None:
            heard[self.name].append(job.secondary_status)

    hub = ServiceHub([Listener("one"), Listener("two"), Listener("three")], read)
    hub.start()
    try:
        for secondary in ("Starting", "Downloading", "Training", "Completed"):
            with lock:
                current["a"] = _record("a", secondary=secondary)
            hub.job_changed("a")
            wait_for(
                lambda s=secondary: all(h and h[-1] == s for h in heard.values()),
                timeout=10,
                what=f"every service hearing {secondary}",
            )
        assert len(reads) == 4, reads  # one read per change, shared by the three services
    finally:
        hub.close()


def _declines(context: ServiceContext) -> None:
    del context


def _record(name: str, secondary: str = "Training") -> Any:
    """What these services read of a record (the hub passes records through untouched)."""
    return SimpleNamespace(name=name, status="InProgress", secondary_status=secondary)


def _no_context() -> ServiceContext:
    return ServiceContext(
        store=None,
        settings=None,
        stop_job=lambda name, message: False,
        now=time.time,
    )
