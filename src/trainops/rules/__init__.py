"""Profiler rules: SageMaker's twelve, evaluated on a job's profiler data, live and afterwards.

Each rule (``_base.ProfilerRule``) is made from its parameters (``rules[].rule_parameters``,
defaults from the catalog) and evaluated on a :class:`ProfilerData` view into a
:class:`RuleResult` (status, details, recommendation, evidence). :data:`RULES` is the table of
every rule by name. Importing this package registers the ``rules`` control-plane service
(``_service``), which evaluates a running job's rules every ``scan_interval_us``, records them
(``describe``'s ``ProfilerRuleEvaluationStatuses``) and runs their actions, and the
``debugger-rules`` service, which does the same for the job's debugger rules
(``trainops.debugger.rules``) on its saved tensors, as they arrive
(``DebugRuleEvaluationStatuses``).
docs/profiling-rules.md describes the rules; docs/internals/rules.md how to add one.
"""

from __future__ import annotations

from trainops.control.services import SERVICES
from trainops.rules._base import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    STATUSES,
    ProfilerData,
    ProfilerRule,
    RuleResult,
)
from trainops.rules._batch_size import BatchSize
from trainops.rules._bottleneck import CPUBottleneck, IOBottleneck
from trainops.rules._dataloader import Dataloader
from trainops.rules._framework_metrics import OverallFrameworkMetrics
from trainops.rules._gpu_memory import GPUMemoryIncrease
from trainops.rules._initialization import MaxInitializationTime
from trainops.rules._load_balancing import LoadBalancing
from trainops.rules._low_gpu import LowGPUUtilization
from trainops.rules._overall_system import OverallSystemUsage
from trainops.rules._registry import RULES, make_rule
from trainops.rules._report import ProfilerReport
from trainops.rules._service import (
    DebuggerRulesService,
    RulesService,
    debugger_rules_service,
    rules_service,
)
from trainops.rules._step_outlier import StepOutlier
from trainops.rules._tracking import ERROR

__all__ = [
    "ERROR",
    "IN_PROGRESS",
    "ISSUES_FOUND",
    "NO_ISSUES_FOUND",
    "RULES",
    "STATUSES",
    "BatchSize",
    "CPUBottleneck",
    "Dataloader",
    "DebuggerRulesService",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "OverallFrameworkMetrics",
    "OverallSystemUsage",
    "ProfilerData",
    "ProfilerReport",
    "ProfilerRule",
    "RuleResult",
    "RulesService",
    "StepOutlier",
    "evaluate_rules",
    "make_rule",
]

SERVICES.register("rules", rules_service)
SERVICES.register("debugger-rules", debugger_rules_service)


def evaluate_rules(data: ProfilerData, names: list[str] | None = None) -> dict[str, RuleResult]:
    """Every rule (or those named) at its defaults on ``data``, by name: for a report or a
    notebook on a job's data."""
    chosen = names if names is not None else [n for n in RULES if n != "ProfilerReport"]
    return {name: make_rule(name).evaluate(data) for name in chosen}
