"""Rules: checks evaluated on what a job records, with a status, evidence and a recommendation.

The catalog of built-in rules and their parameters lives with the spec, which validates
``rules:`` against it (``trainops.spec._rule_catalog``); it is re-exported here.
"""

from __future__ import annotations

from trainops.spec import (
    PROFILER_REPORT,
    PROFILER_RULES,
    REPORT_MEMBERS,
    RuleDefinition,
    check_rule_parameters,
    rule_definition,
)

__all__ = [
    "PROFILER_REPORT",
    "PROFILER_RULES",
    "REPORT_MEMBERS",
    "RuleDefinition",
    "check_rule_parameters",
    "rule_definition",
]
