"""The ProfilerReport rule's report at job end: a control-plane service.

When a job whose ``rules`` include ``ProfilerReport`` ends, the service waits (a bounded time)
for the job's rule evaluations to be final (none ``InProgress``), then writes
``profiler-report.html`` and ``profiler-report.json`` under
``<output prefix>/rule-output/ProfilerReport/profiler-output/`` (SageMaker's place for them)
and lists the page among the job's artifacts as ``profiler_report``. A job without profiler data
gets no report (logged). Waiting is done on ticks, never by blocking the service's thread; a
control plane that closes meanwhile (``trainops run``'s embedded one ends with its job) writes
the pending reports as it closes.
"""

from __future__ import annotations

import logging

from trainops._errors import TrainopsError
from trainops.control import ENDED
from trainops.control.services import ControlService, ServiceContext
from trainops.report._build import job_report, report_prefix, write_report
from trainops.spec import PROFILER_REPORT
from trainops.store import JobRecord

__all__ = ["ARTIFACT", "SERVICE_NAME", "ProfilerReportService", "profiler_report_service"]

SERVICE_NAME = "profiler-report"
ARTIFACT = "profiler_report"
WAIT_FOR_RULES_S = 120.0  # at most, for evaluations still InProgress when the job ended
WAIT_WITHOUT_RULES_S = 5.0  # no evaluation recorded at all: no rules service is running

_log = logging.getLogger("trainops.report")


class ProfilerReportService(ControlService):
    name = SERVICE_NAME
    period = 1.0

    def __init__(
        self,
        context: ServiceContext,
        *,
        wait_for_rules: float = WAIT_FOR_RULES_S,
        wait_without_rules: float = WAIT_WITHOUT_RULES_S,
    ) -> None:
        self.context = context
        self.wait_for_rules, self.wait_without_rules = wait_for_rules, wait_without_rules
        self._pending: dict[str, float] = {}  # job -> when it ended (control-plane clock)
        self._done: set[str] = set()

    def job_changed(self, job: JobRecord) -> None:
        if job.name in self._done or job.status not in ENDED:
            return
        if not any(rule.rule == PROFILER_REPORT for rule in job.spec.profiler_rules):
            return
        self._pending.setdefault(job.name, self.context.now())
        self._attempt(job.name)

    def tick(self) -> None:
        for name in list(self._pending):
            self._attempt(name)

    def close(self) -> None:
        """The control plane is closing (``trainops run``'s embedded server, right after its job
        ended): write what is pending now, with the rules as they stand."""
        for name in list(self._pending):
            del self._pending[name]
            self._done.add(name)
            self.write(name)

    def _attempt(self, name: str) -> None:
        waited = self.context.now() - self._pending[name]
        evaluations = self.context.store.rule_evaluations(name)
        running = [e.name for e in evaluations if e.status == "InProgress"]
        if not evaluations and waited < self.wait_without_rules:
            return
        if running and waited < self.wait_for_rules:
            return
        del self._pending[name]
        self._done.add(name)
        self.write(name)

    def write(self, name: str) -> str | None:
        """Write job ``name``'s report; its page's URI, or None when it has no data."""
        job = self.context.store.get_job(name)
        if job is None:
            return None
        try:
            data = job_report(self.context.store, self.context.settings, name)
            page, _ = write_report(self.context.settings, report_prefix(job), data)
        except TrainopsError as exc:
            _log.warning("no profiler report for job %s: %s", name, exc)
            return None
        self.context.store.add_artifact(name, ARTIFACT, page)
        return page


def profiler_report_service(context: ServiceContext) -> ControlService:
    return ProfilerReportService(context)
