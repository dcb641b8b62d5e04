"""Running a rule over a trial's steps: :func:`invoke_rule` (smdebug's loop) and
:class:`RuleRunner` (the live, incremental form the control plane uses).

:func:`invoke_rule` goes step by step from ``start_step``, waiting for each (the trial's
``wait_for_steps``), skipping steps whose tensors are missing, and ends at ``end_step``, at the
job's end (``NoMoreData``) or when the condition holds (re-raised with ``raise_eval_cond``).

:class:`RuleRunner` never waits: each :meth:`RuleRunner.advance` refreshes the trial once,
evaluates the steps that became available since the last call (at most
:data:`STEPS_PER_ADVANCE`), and returns a :class:`Verdict`. Once the condition holds the verdict
stays (a finding is final, as SageMaker's rule job ends with IssuesFound).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from trainops.debugger.exceptions import NoMoreData, RuleEvaluationConditionMet
from trainops.debugger.rules._base import UNAVAILABLE, UNREADABLE, Rule

__all__ = [
    "IN_PROGRESS",
    "ISSUES_FOUND",
    "NOTHING_EVALUATED",
    "NO_ISSUES_FOUND",
    "STEPS_PER_ADVANCE",
    "RuleRunner",
    "Verdict",
    "invoke_rule",
]

_log = logging.getLogger("trainops.debugger.rules")

ISSUES_FOUND = "IssuesFound"
NO_ISSUES_FOUND = "NoIssuesFound"
IN_PROGRESS = "InProgress"
#: The most steps one :meth:`RuleRunner.advance` evaluates (the rest wait for the next call).
STEPS_PER_ADVANCE = 200
_MAX_DETAILS = 1024
#: The final details of a rule that had no step to evaluate when its job ended.
NOTHING_EVALUATED = (
    "no step evaluated: the job saved no step of the tensors this rule reads (is the "
    "debugger hook on in the script's process? its log says so where it is off)"
)


def invoke_rule(
    rule_obj: Rule, start_step: int = 0, end_step: int | None = None, raise_eval_cond: bool = False
) -> None:
    """Invoke ``rule_obj`` at every step from ``start_step`` (to ``end_step``, exclusive)."""
    step = start_step or 0
    while end_step is None or step < end_step:
        try:
            rule_obj.invoke(step)
        except UNAVAILABLE as exc:
            _log.debug("%s", exc)
        except RuleEvaluationConditionMet as exc:
            if raise_eval_cond:
                raise
            _log.debug("%s", exc)
            if exc.end_of_rule:
                break
        except NoMoreData:
            break
        step += 1


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where a rule stands: ``status`` (InProgress, IssuesFound, NoIssuesFound), a line of
    ``details``, the global ``step`` it concerns (None when none) and ``evidence``."""

    status: str
    details: str
    step: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


class RuleRunner:
    """One rule evaluated on the steps of its trial as they arrive."""

    def __init__(self, rule: Rule, start_step: int = 0) -> None:
        self.rule = rule
        self.next_step = start_step
        self.evaluated = 0
        self.left_out = 0
        self.first_left_out = ""
        self.verdict = Verdict(IN_PROGRESS, "waiting for the first step")

    def advance(self, now: float, *, ended: bool = False) -> Verdict:
        """Evaluate the steps that arrived; at the job's end (``ended``) every step written,
        incomplete ones too, and NoIssuesFound when nothing was found."""
        if self.verdict.status == ISSUES_FOUND:
            return self.verdict
        trial = self.rule.base_trial
        trial.refresh()
        steps = [s for s in trial.steps(show_incomplete_steps=ended) if s >= self.next_step]
        for step in steps[:STEPS_PER_ADVANCE]:
            self.next_step = step + 1
            if self._evaluate(step):
                return self.verdict
        if not ended and len(steps) <= STEPS_PER_ADVANCE and self.rule.check_idle(now):
            return self._found(self.next_step - 1 if self.next_step else None)
        if ended and len(steps) <= STEPS_PER_ADVANCE:
            self.verdict = Verdict(NO_ISSUES_FOUND, self._summary(final=True))
        else:
            self.verdict = Verdict(IN_PROGRESS, self._summary())
        return self.verdict

    def keep_from(self) -> int | None:
        """The oldest global step the rule may still read (None: it reads no more, its
        finding is final)."""
        if self.verdict.status == ISSUES_FOUND:
            return None
        keep_from = getattr(self.rule, "keep_from", None)  # a rule not made on ours: all
        return 0 if keep_from is None else min(int(keep_from(self.next_step)), self.next_step)

    def _evaluate(self, step: int) -> bool:
        try:
            found = self.rule._at_step(step)
        except UNAVAILABLE as exc:
            _log.debug("%s at step %d: %s", self.rule.rule_name, step, exc)
            return False
        except UNREADABLE as exc:  # the job's files: the step is left out, and named
            self.left_out += 1
            if not self.first_left_out:
                lines = str(exc).strip().splitlines()
                line = f"{type(exc).__name__}: {lines[0] if lines else ''}"
                self.first_left_out = line[:_MAX_DETAILS]
            return False
        self.evaluated += 1
        if found:
            self._found(step)
        return found

    def _found(self, step: int | None) -> Verdict:
        details = self.rule.details or f"the condition held at step {step}"
        self.verdict = Verdict(ISSUES_FOUND, details, step, dict(self.rule.evidence))
        return self.verdict

    def _summary(self, *, final: bool = False) -> str:
        if not self.evaluated and not self.left_out:
            # NoIssuesFound (the status of a rule that found nothing), said as what it is
            return NOTHING_EVALUATED if final else "no step evaluated yet"
        last = self.next_step - 1
        summary = f"no issue in {self.evaluated} steps evaluated (up to step {last})"
        return (summary + self._unreadable())[:_MAX_DETAILS]

    def _unreadable(self) -> str:
        """What the job's files kept the rule from reading, if anything (one clause)."""
        reads = int(getattr(self.rule, "unreadable", 0) or 0)
        first = self.first_left_out or str(getattr(self.rule, "first_unreadable", ""))
        if not reads and not self.left_out:
            return ""
        steps = f"{self.left_out} steps left out" if self.left_out else ""
        tensors = f"{reads} tensor reads failed" if reads else ""
        return f"; {', '.join(p for p in (steps, tensors) if p)} (first: {first})"
