"""What every section of the report reads: the job, its start, its series by host and rank."""

from __future__ import annotations

from typing import Any

from trainops.profiler import Series
from trainops.report._stats import downsample
from trainops.spec import PROFILER_RULES
from trainops.store import JobRecord

__all__ = ["ReportContext"]


class ReportContext:
    """What every section reads: the job, its start, and its series by host and rank."""

    def __init__(
        self,
        job: JobRecord,
        t0: float,
        systems: dict[str, Series],
        steps: dict[tuple[str, int], Series],
        loaders: dict[tuple[str, int], Series],
        meta: dict[str, dict[str, Any]],
        max_points: int,
    ) -> None:
        self.job, self.t0, self.max_points = job, t0, max_points
        self.systems, self.steps, self.loaders, self.meta = systems, steps, loaders, meta

    def relative(self, series: Series) -> list[float]:
        return [t - self.t0 for t in series.times]

    def line(self, series: Series, column: str, limit: int | None = None) -> list[list[float]]:
        return downsample(self.relative(series), series.column(column), limit or self.max_points)

    def rule_parameter(self, rule: str, parameter: str) -> Any:
        """``rule``'s ``parameter`` as the job configured it (the rule itself, or ProfilerReport's
        ``<Rule>_<parameter>`` override), else the rule's default."""
        for spec in self.job.spec.profiler_rules:
            params = spec.rule_parameters
            if spec.rule == rule and parameter in params:
                return params[parameter]
            if spec.rule == "ProfilerReport" and f"{rule}_{parameter}" in params:
                return params[f"{rule}_{parameter}"]
        return PROFILER_RULES[rule].defaults[parameter]
