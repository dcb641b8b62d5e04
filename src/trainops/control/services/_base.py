"""The service contract: work that runs beside the control plane's scheduler and monitor.

A service hears two things, each on its own thread (so a slow service never holds up the
controller, an agent's report or another service):

- :meth:`ControlService.tick`, every :attr:`ControlService.period` seconds;
- :meth:`ControlService.job_changed`, with the job's current record, soon after a job's state
  changed (submitted, a status or secondary status moved, it ended). Changes that arrive while
  the service is busy are coalesced: it hears the latest record of each job once;
- :meth:`ControlService.metrics_stored`, if it asks (:attr:`ControlService.metrics_gap`), with
  the jobs whose agents' reports stored new metric points, coalesced to one call per gap.

Through :class:`ServiceContext` a service reads the store, asks for a job to stop (the same
path as a user's stop, under the controller's lock) and takes its own settings. Tree retention
and live rule evaluation are services; the tuner, cost and notifications will be.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from trainops._settings import Settings
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore

__all__ = [
    "ControlService",
    "HostRunner",
    "Interrupter",
    "JobSubmitter",
    "ServiceContext",
    "ServiceFactory",
]


#: ``submit_job(name, spec, code_uri)``: the new job's record (raises as a submission does).
JobSubmitter = Callable[[str, JobSpec, str], JobRecord]

#: ``run_on_host(job name, argv, stdin, variables, timeout)``: the host's ``action`` event
#: data (with ``host``), or why no host ran it.
HostRunner = Callable[[str, list[str], str, dict[str, str], float], "dict[str, Any] | str"]


class Interrupter(Protocol):
    """``interrupt_job(name, *, hosts, source, message, capacity_gap_seconds, notice_seconds)``:
    interrupt a running spot job (``JobController.interrupt``); raises ``TrainopsError`` where
    it cannot be interrupted."""

    def __call__(
        self,
        job_name: str,
        *,
        hosts: Sequence[str] | None = None,
        source: str,
        message: str = "",
        capacity_gap_seconds: float = 0.0,
        notice_seconds: float | None = None,
    ) -> JobRecord: ...


@dataclass(frozen=True, slots=True)
class ServiceContext:
    """What a service may use.

    ``stop_job(name, message)`` begins stopping a running job with ``message`` as the reason
    recorded; it returns False (and does nothing) when the job has ended or is stopping
    already. ``now()`` is the control plane's clock. ``run_on_host(name, argv, stdin,
    variables, timeout)`` runs a rule's command action on the job's first host (as its processes
    run) and returns how it went, or, as a string, why no host could run it (None: no hosts
    here, e.g. a service tested alone). ``submit_job(name, spec, code_uri)`` submits a training
    job as a user's submission does (the tuner's trials); None where the service runs alone.
    ``interrupt_job(name, *, hosts, source, message, capacity_gap_seconds, notice_seconds)``
    interrupts a running spot job (see :class:`Interrupter`); None where the service runs
    alone."""

    store: MetadataStore
    settings: Settings
    stop_job: Callable[[str, str], bool]
    now: Callable[[], float]
    run_on_host: HostRunner | None = None
    submit_job: JobSubmitter | None = None
    interrupt_job: Interrupter | None = None


class ControlService(ABC):  # noqa: B024 - every hook is optional; a service overrides some
    """One service; override the hooks it needs."""

    #: A short name, for thread names and logs.
    name: str = "service"
    #: Seconds between ticks; None: the service is never ticked.
    period: float | None = None
    #: None: the service is not told of stored metric points; else :meth:`metrics_stored` is
    #: called with the jobs that stored some, at most once per this many seconds (the points
    #: of a busy job coalesce: the service's work does not grow with the metric rate).
    metrics_gap: float | None = None

    def tick(self) -> None:
        """Periodic work."""
        return None

    def job_changed(self, job: JobRecord) -> None:
        """A job's state changed; ``job`` is its record now."""
        del job

    def metrics_stored(self, jobs: list[str]) -> None:
        """Jobs ``jobs`` stored new metric points (only with :attr:`metrics_gap` set)."""
        del jobs

    def close(self) -> None:
        """The control plane is closing: release what the service holds."""
        return None


#: Makes a service for a control plane, or None where its settings turn it off.
ServiceFactory = Callable[[ServiceContext], "ControlService | None"]
