"""The registry of profiler rules: name -> class, one entry per built-in rule of the catalog
(``trainops.spec``'s ``PROFILER_RULES`` holds their names and defaults; the conformance suite
checks that the two agree)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainops._registry import Registry
from trainops.rules._base import ProfilerRule
from trainops.rules._batch_size import BatchSize
from trainops.rules._bottleneck import CPUBottleneck, IOBottleneck
from trainops.rules._dataloader import Dataloader
from trainops.rules._framework_metrics import OverallFrameworkMetrics
from trainops.rules._gpu_memory import GPUMemoryIncrease
from trainops.rules._initialization import MaxInitializationTime
from trainops.rules._load_balancing import LoadBalancing
from trainops.rules._low_gpu import LowGPUUtilization
from trainops.rules._overall_system import OverallSystemUsage
from trainops.rules._report import ProfilerReport
from trainops.rules._step_outlier import StepOutlier

__all__ = ["RULES", "make_rule"]

RULES: Registry[type[ProfilerRule]] = Registry("profiler rule", error=KeyError)
for _rule in (
    BatchSize,
    CPUBottleneck,
    IOBottleneck,
    GPUMemoryIncrease,
    LoadBalancing,
    LowGPUUtilization,
    MaxInitializationTime,
    OverallSystemUsage,
    OverallFrameworkMetrics,
    StepOutlier,
    Dataloader,
    ProfilerReport,
):
    RULES.register(_rule.name, _rule)


def make_rule(name: str, parameters: Mapping[str, Any] | None = None) -> ProfilerRule:
    """The rule called ``name``, made with ``parameters`` (checked; defaults filled)."""
    return RULES.lookup(name)(parameters)
