"""The rule contract, as smdebug's: :class:`Rule` over a trial, invoked step by step.

A rule is a class with ``invoke_at_step(step) -> bool`` (True: its condition holds at that
global step). :meth:`Rule.invoke` waits for the step, calls it with the trial's refresh off and
raises :class:`~trainops.debugger.exceptions.RuleEvaluationConditionMet` on True, as
``smdebug.rules.Rule`` does; :func:`~trainops.debugger.rules.invoke_rule` loops over steps.
A custom rule (``RuleParameters`` ``source_s3_uri``/``rule_to_invoke``) is such a class.

:class:`BuiltinRule` is the base of the built-in rules: each is registered under its catalog
name (``trainops.spec``'s debugger rules), takes its parameters as keyword arguments (strings as
SageMaker sends them, or typed), and says why it fired in :attr:`Rule.details` (one line with the
numbers) and :attr:`Rule.evidence` (a small JSON object).
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from trainops.debugger.exceptions import (
    DebugFormatError,
    MissingCollectionFiles,
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from trainops.debugger.format import compute_reduction
from trainops.debugger.modes import ModeKeys
from trainops.debugger.trial import no_refresh

__all__ = ["UNAVAILABLE", "UNREADABLE", "BuiltinRule", "Rule"]

#: What a rule skips at a step: its tensors are not there (smdebug's invoker skips them too).
UNAVAILABLE = (TensorUnavailableForStep, TensorUnavailable, StepUnavailable)
#: What a rule leaves out and names: the job's files cannot be read (a corrupt or forged event
#: file, a tensor over the reader's bounds, a collections file missing or refused). A job's
#: bytes are untrusted: they may blind its own rules, never fail them with a traceback.
UNREADABLE = (DebugFormatError, MissingCollectionFiles)
_MAX_DETAILS = 1024


class Rule(ABC):
    """A rule over ``base_trial`` (and ``other_trials``), as ``smdebug.rules.Rule``.

    smdebug's own signature is ``Rule(base_trial, action_str, other_trials=None)``: a string
    given second is taken as ``action_str`` (trainops runs a rule's actions in the control
    plane, from the job's ``rules[].actions``; ``action_str`` is kept, not acted on).
    """

    def __init__(self, base_trial: Any, other_trials: Any = None, action_str: str = "") -> None:
        if isinstance(other_trials, str):  # smdebug's positional action_str
            other_trials, action_str = None, other_trials
        self.base_trial = base_trial
        self.other_trials: list[Any] = list(other_trials or [])
        self.trials: list[Any] = [base_trial, *self.other_trials]
        self.action_str = action_str
        self.rule_name = type(self).__name__
        self.logger = logging.getLogger(f"trainops.debugger.rules.{self.rule_name}")
        #: Why the condition held at the last step it did (one line, with the numbers).
        self.details = ""
        #: The numbers behind :attr:`details` (a small JSON object).
        self.evidence: dict[str, Any] = {}
        #: How many tensors the rule could not read (:data:`UNREADABLE`), and the first why.
        self.unreadable = 0
        self.first_unreadable = ""

    def note_unreadable(self, exc: BaseException) -> None:
        """Count a read that the job's files made fail (:data:`UNREADABLE`); keep the first
        line of the first one."""
        self.unreadable += 1
        if not self.first_unreadable:
            lines = str(exc).strip().splitlines()
            line = f"{type(exc).__name__}: {lines[0] if lines else ''}"
            self.first_unreadable = line[:_MAX_DETAILS]

    @abstractmethod
    def invoke_at_step(self, step: int) -> bool:
        """Whether the rule's condition holds at global step ``step``."""

    def invoke(self, step: int) -> None:
        """Wait for ``step``, evaluate it with refresh off; raise
        RuleEvaluationConditionMet when the condition holds, StepUnavailable when the step was
        skipped (a later one exists), NoMoreData (from the trial) when the job ended first."""
        trial = self.base_trial
        saved = trial.steps(show_incomplete_steps=True)
        if step not in saved and saved and step < saved[-1]:
            raise StepUnavailable(step, ModeKeys.GLOBAL)
        trial.wait_for_steps([step])
        if step not in trial.steps(show_incomplete_steps=True):
            raise StepUnavailable(step, ModeKeys.GLOBAL)
        if self._at_step(step):
            raise RuleEvaluationConditionMet(self.rule_name, step)

    def _at_step(self, step: int) -> bool:
        with no_refresh(self.trials):
            return bool(self.invoke_at_step(step))

    def found(self, details: str, **evidence: Any) -> bool:
        """Record why the condition holds (:attr:`details`, :attr:`evidence`); returns True."""
        self.details = details[:_MAX_DETAILS]
        self.evidence = evidence
        return True

    def check_idle(self, now: float) -> bool:
        """Whether the condition holds with no new step (a rule on time, not on tensors)."""
        del now
        return False

    def keep_from(self, next_step: int) -> int:
        """The oldest global step the rule may still read when it evaluates ``next_step`` and
        later ones: a live reader (the control plane's) drops what the rule's trials hold of
        earlier steps. A rule of its own may read any step: every one is kept."""
        del next_step
        return 0


class BuiltinRule(Rule):
    """A built-in rule: registered under :attr:`name`, parameters as keyword arguments."""

    #: The catalog's name (``rules: [{rule: <name>}]``).
    name: ClassVar[str]

    def keep_from(self, next_step: int) -> int:
        """A built-in rule reads the step it evaluates; one that compares with earlier steps
        says how far back it reads (or keeps its own small state)."""
        return next_step

    def present(self) -> set[str]:
        """The tensors its trial holds now (a tensor whose steps were all forgotten is gone:
        a look back at it keeps nothing)."""
        with no_refresh(self.base_trial):
            return set(self.base_trial.tensor_names())

    def tensors(
        self,
        collection_names: Iterable[str] = (),
        tensor_regex: Iterable[str] = (),
        *,
        trial: Any = None,
        all_if_none: bool = False,
    ) -> list[str]:
        """The tensor names in ``collection_names`` or matching a ``tensor_regex`` (every
        tensor when both are empty and ``all_if_none``), sorted."""
        trial = self.base_trial if trial is None else trial
        collections, regexes = list(collection_names), list(tensor_regex)
        if not collections and not regexes:
            return sorted(trial.tensor_names()) if all_if_none else []
        names: set[str] = set()
        for collection in collections:
            names.update(self._collection_tensors(trial, collection))
        if regexes:
            names.update(matching(trial.tensor_names(), regexes))
        return sorted(names)

    @staticmethod
    def _collection_tensors(trial: Any, collection: str) -> list[str]:
        try:
            return list(trial.tensor_names(collection=collection))
        except (KeyError, ValueError):
            return []

    def value(self, name: str, step: int, *, trial: Any = None, mode: Any = None) -> Any:
        """The tensor's value at ``step`` as a numpy array, or None when it was not saved
        there (or only its reductions were)."""
        trial = self.base_trial if trial is None else trial
        try:
            tensor = trial.tensor(name)
            if mode is None or mode == ModeKeys.GLOBAL:
                return np.asarray(tensor.value(step))
            return np.asarray(tensor.value(step, mode=mode))
        except UNAVAILABLE:
            return None
        except DebugFormatError as exc:  # this tensor is left out; the others are read
            self.note_unreadable(exc)
            return None

    def reduction(
        self, name: str, step: int, reduction: str, *, absolute: bool = False
    ) -> float | None:
        """The tensor's ``reduction`` at ``step`` (from its raw value when saved, else the
        reduction saved for it), or None."""
        raw = self.value(name, step)
        if raw is not None:
            return float(compute_reduction(raw, reduction, absolute)) if raw.size else None
        try:
            stored = self.base_trial.tensor(name).reduction_value(step, reduction, abs=absolute)
        except UNAVAILABLE:
            return None
        except DebugFormatError as exc:
            self.note_unreadable(exc)
            return None
        return None if stored is None else float(stored)


def matching(names: Iterable[str], regexes: Sequence[str]) -> list[str]:
    """The names that one of ``regexes`` matches (``re.match``, as smdebug)."""
    compiled = [re.compile(r) for r in regexes]
    return [n for n in names if any(c.match(n) for c in compiled)]


def checked_regexes(rule: str, key: str, regexes: Sequence[str]) -> list[str]:
    """``regexes``, each checked to compile (a ValueError naming the rule's parameter)."""
    for regex in regexes:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ValueError(
                f"{rule}.{key}: {regex!r} is not a regular expression: {exc}"
            ) from None
    return list(regexes)
