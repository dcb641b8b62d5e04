"""Rules added to a job that runs (SageMaker's UpdateTrainingJob with
ProfilerRuleConfigurations): the job's stored spec gains them, checked as a submitted spec's
rules are (distinct names, at most 20 of a kind, ProfilerReport once); the rules services pick
them up on their next tick. A rule already there cannot be changed, and profiler rules need the
profiler, which a job's hosts start with or not: it cannot be turned on while they run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from trainops._errors import SpecError
from trainops.protocol import SubmittedJob
from trainops.spec import RuleConfig, check_rules

__all__ = ["with_rules"]

_PROFILER = "profiler"


def with_rules(spec: SubmittedJob, added: Sequence[Mapping[str, Any]]) -> SubmittedJob:
    """``spec`` with the rules ``added`` (the spec's own rule fields) after its own."""
    current = [rule.name for rule in spec.rules]
    try:
        new = [RuleConfig(**rule) for rule in added]
        taken = sorted({str(rule.name) for rule in new} & set(current))
        if taken:
            raise ValueError(f"the job has a rule named {taken[0]} already; it cannot be changed")
        rules = check_rules([RuleConfig(**r.to_json()) for r in spec.rules] + new)
    except (ValidationError, ValueError) as exc:
        raise SpecError([("rules", _one_line(exc))]) from None
    except SpecError as exc:  # a rule's own fields
        raise SpecError([("rules", "; ".join(f"{f}: {r}" for f, r in exc.problems))]) from None
    profiler = spec.profiler_config
    if any(r.kind == _PROFILER for r in new) and (profiler is None or profiler.disable_profiler):
        raise SpecError(
            [
                (
                    "rules",
                    "profiler rules read the profiler's data, but this job's hosts run without "
                    "the profiler, which cannot be turned on while they run: give the rules (or "
                    "profiler_config) when the job is created",
                )
            ]
        )
    dumped = [rule.model_dump(mode="json", exclude_none=False) for rule in rules]
    return SubmittedJob.from_json(spec.to_json() | {"rules": dumped})


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(_where(e["loc"]) + str(e["msg"]) for e in exc.errors())
    return " ".join(str(exc).split())


def _where(loc: tuple[int | str, ...]) -> str:
    return f"{'.'.join(map(str, loc))}: " if loc else ""
