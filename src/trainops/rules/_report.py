"""ProfilerReport: every other profiler rule at once, with ``<RuleName>_<parameter>`` overrides.

Its status is IssuesFound when any member found issues, else InProgress while any member waits
for data, else NoIssuesFound; its evidence holds each member's result under ``rules``.
"""

from __future__ import annotations

from typing import Any

from trainops.rules._base import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    ProfilerData,
    ProfilerRule,
    RuleResult,
)
from trainops.spec._rule_catalog import PROFILER_REPORT, REPORT_MEMBERS

__all__ = ["ProfilerReport", "member_parameters"]


def member_parameters(parameters: dict[str, Any], member: str) -> dict[str, Any]:
    """The overrides of ``member`` among a report's parameters (``CPUBottleneck_threshold``)."""
    prefix = f"{member}_"
    return {k.removeprefix(prefix): v for k, v in parameters.items() if k.startswith(prefix)}


class ProfilerReport(ProfilerRule):
    name = PROFILER_REPORT

    def members(self) -> dict[str, ProfilerRule]:
        """Each member rule, made with its overrides."""
        from trainops.rules._registry import RULES

        return {
            name: RULES[name](member_parameters(self.parameters, name)) for name in REPORT_MEMBERS
        }

    def _evaluate(self, data: ProfilerData) -> RuleResult:
        results = {name: rule.evaluate(data) for name, rule in self.members().items()}
        found = [name for name, result in results.items() if result.found]
        waiting = [name for name, result in results.items() if result.status == IN_PROGRESS]
        evidence = {"rules": {name: result.to_json() for name, result in results.items()}}
        if found:
            details = f"{len(found)} of {len(results)} rules found issues: {', '.join(found)}"
            advice = " ".join(f"{n}: {results[n].recommendation}" for n in found)
            return RuleResult(ISSUES_FOUND, details, advice, evidence)
        if waiting:
            details = f"no issues so far; waiting for data: {', '.join(waiting)}"
            return RuleResult(IN_PROGRESS, details, "", evidence)
        return RuleResult(
            NO_ISSUES_FOUND, f"none of {len(results)} rules found issues", "", evidence
        )
