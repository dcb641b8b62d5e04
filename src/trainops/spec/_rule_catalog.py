"""The built-in rules and their parameters, as the SageMaker SDK's ``rule_configs`` names them.

Only names, kinds and defaults live here, with the spec that validates ``rules:`` against them
(the rules themselves are ``trainops.rules`` and ``trainops.debugger.rules``, far above the
spec). Profiler rules (reference/sagemaker.md §6.2) use the defaults of the
``smdebug_rulesconfig`` code, which the SDK sends; every profiler rule also takes
``scan_interval_us`` (how often it is evaluated while the job runs). ``ProfilerReport`` runs the
ten others and takes ``<RuleName>_<parameter>`` overrides (``CPUBottleneck_threshold: 90``).
Debugger rules (§5.6) are in ``_debugger_catalog``: their parameters, defaults and the
collections their default configuration saves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainops.spec._debugger_catalog import (
    DEBUGGER_RULES,
    LATER_RULES,
    check_debugger_parameters,
)
from trainops.spec._rule_definition import RuleDefinition

__all__ = [
    "CUSTOM",
    "DEBUGGER",
    "DEBUGGER_RULES",
    "PROFILER",
    "PROFILER_REPORT",
    "PROFILER_RULES",
    "REPORT_MEMBERS",
    "RuleDefinition",
    "check_rule_parameters",
    "rule_definition",
    "rule_name",
]

PROFILER = "profiler"
DEBUGGER = "debugger"
CUSTOM = "custom"  # a debugger rule from the job's own source (no catalog entry)
SCAN_INTERVAL_US = 60_000_000
PROFILER_REPORT = "ProfilerReport"


def _profiler(name: str, summary: str, **defaults: Any) -> RuleDefinition:
    return RuleDefinition(
        name, "profiler", {**defaults, "scan_interval_us": SCAN_INTERVAL_US}, summary
    )


_RULES = (
    _profiler(
        "BatchSize",
        "CPU, GPU and GPU memory all low on a node: the batch size could be larger",
        cpu_threshold_p95=70,
        gpu_threshold_p95=70,
        gpu_memory_threshold_p95=70,
        patience=1000,
        window=500,
    ),
    _profiler(
        "CPUBottleneck",
        "GPUs wait while the CPU is busy",
        threshold=50,
        gpu_threshold=10,
        cpu_threshold=90,
        patience=1000,
    ),
    _profiler(
        "IOBottleneck",
        "GPUs wait while the host waits on I/O",
        threshold=50,
        gpu_threshold=10,
        io_threshold=50,
        patience=1000,
    ),
    _profiler(
        "GPUMemoryIncrease",
        "GPU memory keeps growing",
        increase=5,
        patience=1000,
        window=10,
    ),
    _profiler(
        "LoadBalancing",
        "GPUs of a node work unevenly",
        threshold=0.5,
        patience=1000,
    ),
    _profiler(
        "LowGPUUtilization",
        "GPU utilization is low or fluctuates",
        threshold_p95=70,
        threshold_p5=10,
        window=500,
        patience=1000,
    ),
    _profiler(
        "MaxInitializationTime",
        "the first training step comes late",
        threshold=20,
    ),
    _profiler("OverallSystemUsage", "system usage per node (never fires)"),
    _profiler("OverallFrameworkMetrics", "where the training loop's time goes (never fires)"),
    _profiler(
        "StepOutlier",
        "steps far slower than the mean",
        stddev=3,
        mode=None,
        n_outliers=10,
    ),
    _profiler(
        "Dataloader",
        "dataloader workers far fewer or more than the CPU cores",
        min_threshold=70,
        max_threshold=200,
        patience=10,
    ),
)

PROFILER_RULES: dict[str, RuleDefinition] = {rule.name: rule for rule in _RULES}
REPORT_MEMBERS = tuple(PROFILER_RULES)
PROFILER_RULES[PROFILER_REPORT] = RuleDefinition(
    PROFILER_REPORT,
    "profiler",
    {"scan_interval_us": SCAN_INTERVAL_US, "opt_out_telemetry": False},
    "runs every profiler rule and writes the profiler report",
)
_MODES = ("TRAIN", "EVAL", "GLOBAL")
_WHOLE = frozenset({"patience", "window", "n_outliers", "scan_interval_us"})
_SDK_NAMES = {rule.sdk_name: name for name, rule in DEBUGGER_RULES.items() if rule.sdk_name}


def rule_name(name: str) -> str:
    """The rule's own name for ``name``, which may also be its SDK function's name
    (``vanishing_gradient`` is ``VanishingGradient``); a KeyError listing the rules otherwise."""
    if name in PROFILER_RULES or name in DEBUGGER_RULES:
        return name
    if name in _SDK_NAMES:
        return _SDK_NAMES[name]
    later = LATER_RULES.get(name)
    if later is not None:
        raise KeyError(f"{name!r} {later}")
    profiler, debugger = ", ".join(PROFILER_RULES), ", ".join(DEBUGGER_RULES)
    raise KeyError(
        f"{name!r} is not a built-in rule; profiler rules: {profiler}; debugger rules: {debugger}"
    )


def rule_definition(name: str) -> RuleDefinition:
    """The built-in rule called ``name`` (or its SDK function's name); a KeyError that lists
    them otherwise."""
    name = rule_name(name)
    return PROFILER_RULES.get(name) or DEBUGGER_RULES[name]


def check_rule_parameters(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against rule ``name``'s parameters; returns them all, defaults filled.

    Raises ValueError naming the parameter that is unknown or of the wrong kind."""
    rule = rule_definition(name)
    if rule.kind == DEBUGGER:
        return check_debugger_parameters(rule, given)
    if name == PROFILER_REPORT:
        return _report_parameters(given)
    resolved = dict(rule.defaults)
    for key, value in given.items():
        if key not in rule.defaults:
            known = ", ".join(sorted(rule.defaults))
            raise ValueError(f"{name} has no parameter {key!r}; its parameters: {known}")
        resolved[key] = _checked(name, key, value, rule.defaults[key])
    return resolved


def _report_parameters(given: Mapping[str, Any]) -> dict[str, Any]:
    resolved = dict(PROFILER_RULES[PROFILER_REPORT].defaults)
    for key, value in given.items():
        if key in resolved:
            resolved[key] = _checked(PROFILER_REPORT, key, value, resolved[key])
            continue
        member, _, parameter = key.partition("_")
        if member not in REPORT_MEMBERS or not parameter:
            raise ValueError(
                f"{PROFILER_REPORT} has no parameter {key!r}: override a rule's parameter as "
                "<RuleName>_<parameter>, e.g. CPUBottleneck_threshold"
            )
        defaults = PROFILER_RULES[member].defaults
        if parameter not in defaults:
            known = ", ".join(sorted(defaults)) or "none"
            raise ValueError(
                f"{key}: {member} has no parameter {parameter!r}; its parameters: {known}"
            )
        resolved[key] = _checked(member, parameter, value, defaults[parameter])
    return resolved


def _checked(rule: str, key: str, value: Any, default: Any) -> Any:
    if key == "mode":
        if value is None or (isinstance(value, str) and value.upper() in _MODES):
            return None if value is None else value.upper()
        raise ValueError(f"{rule}.{key} must be one of {', '.join(_MODES)} or null, not {value!r}")
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise ValueError(f"{rule}.{key} must be true or false, not {value!r}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{rule}.{key} must be a number, not {value!r}")
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise ValueError(f"{rule}.{key} must be a finite number of 0 or more, not {value!r}")
    if key in _WHOLE:
        if float(value) != int(value):
            raise ValueError(f"{rule}.{key} must be a whole number, not {value!r}")
        return int(value)
    return value
