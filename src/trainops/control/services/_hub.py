"""Runs the control plane's services: one thread each, fed ticks and job changes.

The controller calls :meth:`ServiceHub.job_changed` with a job's name whenever it records a
change; that only adds the name to each service's pending set and wakes its thread, so the
caller (which may hold the controller's lock) never waits for a service. Each thread reads the
job's current record from the store when it gets to it. A service that raises is logged and
keeps running.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from trainops.control.services._base import ControlService
from trainops.store import JobRecord

__all__ = ["ServiceHub", "ServiceRunner"]

_log = logging.getLogger("trainops.control")
_CLOSE_TIMEOUT_S = 10.0

JobReader = Callable[[str], JobRecord | None]


class ServiceRunner:
    """The thread of one service."""

    def __init__(self, service: ControlService, read_job: JobReader) -> None:
        self.service = service
        self._read_job = read_job
        self._pending: dict[str, None] = {}  # names in order of arrival, each once
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(
            target=self._run, name=f"trainops-service-{service.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def job_changed(self, name: str) -> None:
        with self._cond:
            self._pending[name] = None
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=_CLOSE_TIMEOUT_S)
        self._guard("close", self.service.close)

    def _run(self) -> None:
        period = self.service.period
        next_tick = time.monotonic()
        while True:
            with self._cond:
                while not self._closing and not self._pending:
                    if period is not None and time.monotonic() >= next_tick:
                        break
                    wait = None if period is None else max(0.0, next_tick - time.monotonic())
                    self._cond.wait(wait)
                if self._closing:
                    return
                names, self._pending = list(self._pending), {}
            for name in names:
                self._deliver(name)
            if period is not None and time.monotonic() >= next_tick:
                self._guard("tick", self.service.tick)
                next_tick = time.monotonic() + period

    def _deliver(self, name: str) -> None:
        try:
            job = self._read_job(name)
        except Exception:
            _log.exception("service %s: reading job %s failed", self.service.name, name)
            return
        if job is not None:
            self._guard(f"job_changed({name})", lambda: self.service.job_changed(job))

    def _guard(self, what: str, call: Callable[[], None]) -> None:
        try:
            call()
        except Exception:
            _log.exception("service %s: %s failed", self.service.name, what)


class ServiceHub:
    """Every service of one control plane."""

    def __init__(self, services: list[ControlService], read_job: JobReader) -> None:
        self.services = services
        self._runners = [ServiceRunner(service, read_job) for service in services]

    def start(self) -> None:
        for runner in self._runners:
            runner.start()

    def job_changed(self, name: str) -> None:
        for runner in self._runners:
            runner.job_changed(name)

    def close(self) -> None:
        for runner in self._runners:
            runner.close()

    def get(self, name: str) -> ControlService | None:
        return next((s for s in self.services if s.name == name), None)
