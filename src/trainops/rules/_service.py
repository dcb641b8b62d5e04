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
from trainops.protocol import RuleSpec
from trainops.rules._base import ISSUES_FOUND, NO_ISSUES_FOUND
from trainops.rules._tracking import KIND, JobRules, rules_of_kind, write_errors
from trainops.store import JobRecord

__all__ = [
    "TICK_SECONDS",
    "DebuggerRulesService",
    "RulesService",
    "debugger_rules_service",
    "rules_service",
]

DEBUGGER = "debugger"

_log = logging.getLogger("trainops.rules")

#: How often the service looks for due rules (a rule's own interval is ``scan_interval_us``).
TICK_SECONDS = 1.0
_RUNNING = ("InProgress", "Stopping")
_ENDED = tuple(sorted(ENDED))
_VERDICTS = frozenset({ISSUES_FOUND, NO_ISSUES_FOUND})
_ADOPT_LIMIT = 10_000
_SETTLE_WITHIN_S = 7 * 24 * 3600.0


class RulesService(ControlService):
    """The profiler rules of running jobs (:class:`DebuggerRulesService`: their debugger rules)."""

    name = "rules"
    period = TICK_SECONDS
    #: The kind of rule this service evaluates (``RuleSpec.kind``).
    kind = KIND

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.jobs: dict[str, JobRules] = {}
        self._adopted = False

    def job_changed(self, job: JobRecord) -> None:
        if not self._rules(job):
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
            if self._rules(job) and job.name not in self.jobs:
                self._track(job)
        since = self.context.now() - _SETTLE_WITHIN_S
        for job in store.list_jobs(statuses=_ENDED, created_after=since, limit=_ADOPT_LIMIT):
            if self._rules(job):
                self._finish(job)

    def _rules(self, job: JobRecord) -> tuple[RuleSpec, ...]:
        return rules_of_kind(job, self.kind)

    def _finish(self, job: JobRecord) -> None:
        rules = self.jobs.pop(job.name, None)
        if rules is None:
            rows = self.context.store.rule_evaluations(job.name)
            settled = {row.name for row in rows if row.status in _VERDICTS}
            if all(spec.name in settled for spec in self._rules(job)):
                return  # evaluated to the end already (or by an earlier control plane)
            rules = self._rules_of(job)
            if rules is None:
                return
        try:
            rules.scan(job, final=True)
        finally:
            rules.close()

    def _track(self, job: JobRecord) -> None:
        rules = self._rules_of(job)
        if rules is not None:
            self.jobs[job.name] = rules

    def _rules_of(self, job: JobRecord) -> JobRules | None:
        """The job's rules, or None (each rule's row says Error) when its data cannot be read
        (no store for its prefix: a scheme without settings, credentials missing)."""
        try:
            return JobRules(job, self.context, self.kind)
        except Exception as exc:
            what = "profiler data" if self.kind == KIND else "tensors"
            _log.exception("rules of job %s: cannot read its %s", job.name, what)
            line = f"cannot read the job's {what}: {type(exc).__name__}: {exc}"
            write_errors(job, self.context, line.splitlines()[0], self.kind)
            return None

    def close(self) -> None:
        for rules in self.jobs.values():
            rules.close()
        self.jobs.clear()


class DebuggerRulesService(RulesService):
    """The debugger rules of running jobs: each evaluated on the steps that arrived since the
    last tick (``trainops.rules._debugger``)."""

    name = "debugger-rules"
    kind = DEBUGGER


def rules_service(context: ServiceContext) -> RulesService:
    """The service's factory (registered as ``rules``)."""
    return RulesService(context)


def debugger_rules_service(context: ServiceContext) -> DebuggerRulesService:
    """The debugger rules service's factory (registered as ``debugger-rules``)."""
    return DebuggerRulesService(context)
