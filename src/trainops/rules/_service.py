"""Live rule evaluation as a control-plane service (``trainops.control.services``).

For each job with rules that is running, the service keeps a :class:`~trainops.rules._tracking.JobRules`
(a profiler reader on the job's profiler prefix, read incrementally) and, every tick, evaluates
the rules whose ``scan_interval_us`` has passed. When the job ends it evaluates every rule once
more (the final verdict, so a short job gets one too) and drops the job's state. After a
control-plane restart, the first tick adopts the running jobs; a rule that had found issues
keeps them and does not run its actions again.
"""

from __future__ import annotations

import logging

from trainops.control import ENDED
from trainops.control.services import ControlService, ServiceContext
from trainops.rules._base import ISSUES_FOUND, NO_ISSUES_FOUND
from trainops.rules._tracking import JobRules, write_errors
from trainops.store import JobRecord

__all__ = ["TICK_SECONDS", "RulesService", "rules_service"]

_log = logging.getLogger("trainops.rules")

#: How often the service looks for due rules (a rule's own interval is ``scan_interval_us``).
TICK_SECONDS = 1.0
_RUNNING = ("InProgress", "Stopping")
_ENDED = tuple(sorted(ENDED))
_VERDICTS = frozenset({ISSUES_FOUND, NO_ISSUES_FOUND})
_ADOPT_LIMIT = 10_000
_SETTLE_WITHIN_S = 7 * 24 * 3600.0


class RulesService(ControlService):
    name = "rules"
    period = TICK_SECONDS

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.jobs: dict[str, JobRules] = {}
        self._adopted = False

    def job_changed(self, job: JobRecord) -> None:
        if not job.spec.profiler_rules:
            return
        if job.status in ENDED:
            self._finish(job)
        elif job.name not in self.jobs:
            self._track(job)

    def tick(self) -> None:
        if not self._adopted:
            self._adopted = True
            self._adopt()
        for name, rules in list(self.jobs.items()):
            current = self.context.store.get_job(name)
            if current is None:
                self.jobs.pop(name, None)
            elif current.status in ENDED:
                self._finish(current)
            else:
                rules.scan(current)

    def _adopt(self) -> None:
        """Take over from an earlier control plane: track its running jobs, and settle the
        rules of jobs that ended while it closed (a job's end heard as it shut down)."""
        store = self.context.store
        for job in store.list_jobs(statuses=_RUNNING, limit=_ADOPT_LIMIT):
            if job.spec.profiler_rules and job.name not in self.jobs:
                self._track(job)
        since = self.context.now() - _SETTLE_WITHIN_S
        for job in store.list_jobs(statuses=_ENDED, created_after=since, limit=_ADOPT_LIMIT):
            if job.spec.profiler_rules:
                self._finish(job)

    def _finish(self, job: JobRecord) -> None:
        rules = self.jobs.pop(job.name, None)
        if rules is None:
            rows = self.context.store.rule_evaluations(job.name)
            settled = {row.name for row in rows if row.status in _VERDICTS}
            if all(spec.name in settled for spec in job.spec.profiler_rules):
                return  # evaluated to the end already (or by an earlier control plane)
            rules = self._rules_of(job)
            if rules is None:
                return
        rules.scan(job, final=True)

    def _track(self, job: JobRecord) -> None:
        rules = self._rules_of(job)
        if rules is not None:
            self.jobs[job.name] = rules

    def _rules_of(self, job: JobRecord) -> JobRules | None:
        """The job's rules, or None (each rule's row says Error) when its data cannot be read
        (no store for its prefix: a scheme without settings, credentials missing)."""
        try:
            return JobRules(job, self.context)
        except Exception as exc:
            _log.exception("rules of job %s: cannot read its profiler data", job.name)
            line = f"cannot read the job's profiler data: {type(exc).__name__}: {exc}"
            write_errors(job, self.context, line.splitlines()[0])
            return None

    def close(self) -> None:
        self.jobs.clear()


def rules_service(context: ServiceContext) -> RulesService:
    """The service's factory (registered as ``rules``)."""
    return RulesService(context)
