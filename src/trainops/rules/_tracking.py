"""One running job's rules: its profiler reader, when each rule is due, what each has found.

:class:`JobRules` evaluates a job's due rules on the data read so far and records each verdict
as a :class:`~trainops.store.RuleEvaluation` row (and as JSON under the job's
``rule-output/<rule name>/``). A rule's status is InProgress while the job runs and it has found
nothing, IssuesFound from its first finding on (its actions run then, once), and at the job's
end its final verdict; a rule that raises is Error, with the exception's line, and is tried
again at its next scan. The row's ``result`` JSON::

    {"rule": ..., "parameters": {...}, "result": <RuleResult JSON of the latest evaluation>,
     "found": <RuleResult JSON of the first finding> | null, "found_time": <Unix s> | null,
     "actions": [<ActionResult JSON>...], "acting": <bool>, "evaluations": <n>,
     "output": <URI of the JSON>}

``acting`` is true from the moment a finding is recorded until what its actions did is: a
control plane that stopped in between (a command action queued for the job's host is held in
memory only) leaves it true, and the next one runs the finding's actions at its first scan. The
finding is rebuilt as it was (its time included), so a command action sent to a host again has
the same action id, and a host that ran it already reports that run again instead of running it
twice (``trainops.control._host_actions``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from trainops._errors import StorageError
from trainops.actions import (
    ActionContext,
    Finding,
    OnHost,
    WebhookPolicy,
    job_environment,
    run_actions,
)
from trainops.control.services import ServiceContext
from trainops.profiler import ProfilerReader, profiler_prefix
from trainops.protocol import RuleSpec
from trainops.rules._base import ISSUES_FOUND, ProfilerData, RuleResult
from trainops.rules._custom import CustomRuleEvaluation
from trainops.rules._debugger import DebuggerRuleEvaluation, Evaluates, SharedTrials
from trainops.rules._registry import make_rule
from trainops.spec._debugger_catalog import CUSTOM
from trainops.storage import ObjectStore, join_uri, store_for
from trainops.store import JobRecord, RuleEvaluation

__all__ = ["ERROR", "KIND", "RULE_OUTPUT", "JobRules", "RuleState", "rules_of_kind", "write_errors"]

_log = logging.getLogger("trainops.rules")

ERROR = "Error"
KIND = "profiler"
#: How often a debugger rule still InProgress has its row rewritten with its progress, at most.
PROGRESS_EVERY_S = 5.0
RULE_OUTPUT = "rule-output"
_MICROSECONDS = 1_000_000


@dataclass(slots=True)
class RuleState:
    """One rule of one job: the rule, its next due time and what it has found so far."""

    spec: RuleSpec
    rule: Evaluates | None
    error: str | None = None
    kind: str = KIND
    due: float = 0.0
    evaluations: int = 0
    found: dict[str, Any] | None = None
    found_time: float | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)
    acting: bool = False  # the finding is recorded, what its actions did not yet
    shown: tuple[str, str] = ("", "")  # the status and details last written
    shown_at: float = 0.0

    @property
    def interval(self) -> float:
        """Seconds between evaluations: ``scan_interval_us`` (a debugger rule without it: every
        tick, as its steps arrive)."""
        default = 60_000_000 if self.kind == KIND else 0
        return float(self.spec.rule_parameters.get("scan_interval_us", default)) / _MICROSECONDS

    @classmethod
    def make(
        cls,
        spec: RuleSpec,
        row: RuleEvaluation | None,
        job: JobRecord,
        context: ServiceContext,
        trials: SharedTrials | None = None,
    ) -> RuleState:
        """The rule's state; a built-in debugger rule reads through ``trials``, shared by the
        job's rules (see :class:`DebuggerRuleEvaluation`)."""
        kind = spec.kind
        try:
            if kind == KIND:
                state = cls(spec, make_rule(spec.rule, spec.rule_parameters))
            elif kind == "custom" or spec.rule == CUSTOM:
                state = cls(spec, CustomRuleEvaluation(spec, job, context), kind=kind)
            else:
                evaluation = DebuggerRuleEvaluation(spec, job, context, trials)
                state = cls(spec, evaluation, kind=kind)
        except Exception as exc:  # a rule that cannot be made is an Error row
            state = cls(spec, None, f"{type(exc).__name__}: {exc}", kind=kind)
        if row is not None and row.status == ISSUES_FOUND:  # a restarted control plane
            state.found = row.result.get("found") or {"details": row.status_details}
            state.found_time = row.result.get("found_time")
            state.actions = list(row.result.get("actions") or [])
            state.acting = row.result.get("acting") is True
        return state


class JobRules:
    """The rules of one job, evaluated on its profiler data."""

    def __init__(self, job: JobRecord, context: ServiceContext, kind: str = KIND) -> None:
        self.job = job
        self.context = context
        self.kind = kind
        self.store: ObjectStore = store_for(job.output_prefix, context.settings)
        self._reader: ProfilerReader | None = None
        rows = {row.name: row for row in context.store.rule_evaluations(job.name)}
        specs = rules_of_kind(job, kind)
        trials = SharedTrials()  # the debugger rules' trials, one per prefix
        self.rules = [RuleState.make(s, rows.get(s.name), job, context, trials) for s in specs]
        if kind == KIND:
            assert self.reader is not None  # made now: a prefix that cannot be read fails here
        now = context.now()
        for state in self.rules:
            if state.spec.name not in rows:
                self._write(state, None, now)

    def close(self) -> None:
        """Release what the rules hold (a custom rule's process)."""
        for state in self.rules:
            close = getattr(state.rule, "close", None)
            if close is not None:
                close()

    def scan(self, job: JobRecord, *, final: bool = False) -> None:
        """Evaluate the rules that are due (every one when ``final``: the job has ended)."""
        self.job = job
        self._take_added(job)
        for state in self.rules:
            if state.acting and state.found is not None:  # an earlier control plane stopped
                self._act_on_finding(state, RuleResult.from_json(state.found), final)
        now = self.context.now()
        due = [s for s in self.rules if final or now >= s.due]
        if not due:
            return
        data = self._data(job, now, final, profiler=any(s.kind == KIND for s in due))
        for state in due:
            state.due = now + state.interval
            self._evaluate(state, data, final)

    def _take_added(self, job: JobRecord) -> None:
        """Track the rules added to the job's spec since (UpdateTrainingJob), due at once."""
        known = {state.spec.name for state in self.rules}
        added = [spec for spec in rules_of_kind(job, self.kind) if spec.name not in known]
        now = self.context.now()
        for spec in added:
            state = RuleState.make(spec, None, job, self.context)
            self.rules.append(state)
            self._write(state, None, now)

    def _data(self, job: JobRecord, now: float, final: bool, *, profiler: bool) -> ProfilerData:
        """The job's profiler data read so far (read only when a profiler rule is due; a
        debugger rule reads its own trial and takes only the times from here)."""
        times: dict[str, Any] = {
            "job_start": job.training_start_time or job.creation_time,
            "job_end": (job.training_end_time or job.last_modified_time) if final else None,
            "now": now,
        }
        if not profiler:
            return ProfilerData(**times)
        self.reader.refresh()
        return ProfilerData.from_reader(self.reader, **times)

    @property
    def reader(self) -> ProfilerReader:
        """The job's profiler reader, made when first needed."""
        if self._reader is None:
            config = self.job.spec.profiler_config
            prefix = profiler_prefix(
                config.s3_output_path if config else None, self.job.output_prefix
            )
            self._reader = ProfilerReader(store_for(prefix, self.context.settings), prefix)
        return self._reader

    def _evaluate(self, state: RuleState, data: ProfilerData, final: bool) -> None:
        if state.rule is None:
            self._error(state, state.error or "the rule could not be made")
            return
        try:
            result = state.rule.evaluate(data)
        except Exception as exc:  # what the job wrote, often: one line (the trace at debug)
            line = _exception_line(exc)
            _log.warning("rule %s of job %s failed: %s", state.spec.name, self.job.name, line)
            _log.debug("rule %s of job %s failed", state.spec.name, self.job.name, exc_info=True)
            self._error(state, line)
            return
        state.evaluations += 1
        first = result.found and state.found is None
        if first:
            state.found, state.found_time = result.to_json(), self.context.now()
            state.acting = bool(state.spec.actions)
        if first or final or not self._quiet(state, result):
            self._write(state, result, self.context.now(), final=final)
        if first:
            self._act_on_finding(state, result, final)

    def _quiet(self, state: RuleState, result: RuleResult) -> bool:
        """Whether a debugger rule's evaluation need not be written: it says what its row says,
        or it is still InProgress and the row is younger than :data:`PROGRESS_EVERY_S` (such a
        rule is evaluated every tick; its row would be rewritten every second)."""
        if state.kind == KIND:
            return False
        status, details = _status(state, result, False, None)
        if (status, details) == state.shown:
            return True
        fresh = self.context.now() - state.shown_at < PROGRESS_EVERY_S
        return status == state.shown[0] == "InProgress" and fresh

    def _act_on_finding(self, state: RuleState, result: RuleResult, final: bool) -> None:
        """Run the actions of the rule's finding (``result``), then record what they did."""
        state.actions = [a.to_json() for a in self._act(state, result)]
        state.acting = False
        self._write(state, result, self.context.now(), final=final)

    def _act(self, state: RuleState, result: RuleResult) -> list[Any]:
        if not state.spec.actions:
            return []
        found = RuleResult.from_json(state.found) if state.found is not None else result
        finding = Finding(
            job=self.job.name,
            rule_name=state.spec.name,
            rule=state.spec.rule,
            status=found.status,
            details=found.details,
            recommendation=found.recommendation,
            evidence=found.to_json()["evidence"],
            time=self.context.now() if state.found_time is None else state.found_time,
        )
        return run_actions(finding, state.spec.actions, self._action_context())

    def _action_context(self) -> ActionContext:
        """What the job's actions may do: webhooks where the settings allow, commands on the
        job's first host while it runs, else with the job's recorded environment (its hosts'
        names from this attempt)."""
        job, settings = self.job, self.context.settings
        hosts = [h.host for h in self.context.store.hosts(job.name, job.attempt)]
        return ActionContext(
            self.context.stop_job,
            webhooks=WebhookPolicy.from_names(settings.actions.webhook_networks),
            environment=job_environment(job.name, job.spec, hosts),
            on_host=self._on_host(job.name),
        )

    def _on_host(self, job_name: str) -> OnHost | None:
        run_on_host = self.context.run_on_host
        if run_on_host is None:
            return None
        return lambda argv, stdin, variables, timeout: run_on_host(
            job_name, argv, stdin, variables, timeout
        )

    def _error(self, state: RuleState, line: str) -> None:
        self._write(state, None, self.context.now(), error=line)

    def _write(
        self,
        state: RuleState,
        result: RuleResult | None,
        now: float,
        *,
        final: bool = False,
        error: str | None = None,
    ) -> None:
        status, details = _status(state, result, final, error)
        output = join_uri(self.job.output_prefix, RULE_OUTPUT, state.spec.name, "result.json")
        body = {
            "rule": state.spec.rule,
            "parameters": dict(state.spec.rule_parameters),
            "result": None if result is None else result.to_json(),
            "found": state.found,
            "found_time": state.found_time,
            "actions": state.actions,
            "acting": state.acting,
            "evaluations": state.evaluations,
            "output": output,
        }
        row = RuleEvaluation(
            self.job.name, state.spec.name, state.spec.rule, state.kind, status, details, now, body
        )
        self.context.store.set_rule_evaluation(row)
        state.shown, state.shown_at = (status, details), now
        self._publish(output, row)

    def _publish(self, uri: str, row: RuleEvaluation) -> None:
        document = {
            "job": row.job,
            "name": row.name,
            "status": row.status,
            "status_details": row.status_details,
            "last_modified_time": row.last_modified_time,
            **row.result,
        }
        try:
            self.store.put_bytes(uri, json.dumps(document, indent=1, allow_nan=False).encode())
        except (StorageError, OSError, ValueError) as exc:
            _log.warning("rule %s of job %s: writing %s failed: %s", row.name, row.job, uri, exc)


def _status(
    state: RuleState, result: RuleResult | None, final: bool, error: str | None
) -> tuple[str, str]:
    if error is not None:
        return ERROR, error[:1024]
    if result is None:
        if state.found is not None:
            return ISSUES_FOUND, str(state.found.get("details", ""))
        return "InProgress", "waiting for the first evaluation"
    if state.found is not None:
        details = result.details if result.found else str(state.found.get("details", ""))
        return ISSUES_FOUND, details[:1024]
    if final:
        return result.status, result.details[:1024]
    return "InProgress", result.details[:1024]


def _exception_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def rules_of_kind(job: JobRecord, kind: str) -> tuple[RuleSpec, ...]:
    """The rules of ``job`` of ``kind`` (``profiler``, or ``debugger``: the built-in debugger
    rules and the custom ones, which read the saved tensors too)."""
    if kind == KIND:
        return job.spec.profiler_rules
    return (*job.spec.debugger_rules, *job.spec.custom_rules)


def write_errors(job: JobRecord, context: ServiceContext, line: str, kind: str = KIND) -> None:
    """Every rule of ``job`` of ``kind`` is Error with ``line`` (its data cannot be read)."""
    for spec in rules_of_kind(job, kind):
        body = {"rule": spec.rule, "parameters": dict(spec.rule_parameters), "result": None}
        row = RuleEvaluation(
            job.name, spec.name, spec.rule, kind, ERROR, line[:1024], context.now(), body
        )
        context.store.set_rule_evaluation(row)
