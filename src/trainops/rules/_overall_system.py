"""OverallSystemUsage: max/p99/p95/p50/min per node of each system metric. It never fires."""

from __future__ import annotations

from typing import Any

from trainops.profiler import UNITS, numbered
from trainops.rules._base import NO_ISSUES_FOUND, ProfilerData, ProfilerRule, RuleResult
from trainops.rules._stats import SystemTable, finite, fmt, no_system_data, quantiles, system_table

__all__ = ["OverallSystemUsage", "usage"]

HOST_METRICS = ("cpu", "iowait", "memory", "disk_read", "disk_write", "net_rx", "net_tx")
QUANTILES = (("max", 100), ("p99", 99), ("p95", 95), ("p50", 50), ("min", 0))


def usage(table: SystemTable) -> dict[str, dict[str, Any]]:
    """metric -> {unit, max, p99, p95, p50, min} for the host metrics and every GPU."""
    names = [m for m in HOST_METRICS if finite(table.get(m))]
    for index in numbered(list(table.columns), "gpu"):
        names += [f"gpu{index}", f"gpu{index}_memory"]
    found: dict[str, dict[str, Any]] = {}
    for name in names:
        values = table.cpu if name == "cpu" else table.get(name)
        if not finite(values):
            continue
        family = "gpu<N>_memory" if name.endswith("_memory") else name
        family = "gpu<N>" if name.startswith("gpu") and "_" not in name else family
        stats: dict[str, Any] = {"unit": UNITS.get(family, "")}
        found_values = quantiles(values, [q for _, q in QUANTILES])
        stats |= dict(zip([label for label, _ in QUANTILES], found_values, strict=True))
        found[name] = stats
    return found


class OverallSystemUsage(ProfilerRule):
    name = "OverallSystemUsage"

    def _evaluate(self, data: ProfilerData) -> RuleResult:
        if not data.system:
            return no_system_data(data)
        evidence = {host: usage(system_table(data, host)) for host in sorted(data.system)}
        parts = []
        for host, metrics in evidence.items():
            shown = [
                f"{name} p95 {fmt(metrics[name]['p95'])} %"
                for name in metrics
                if name in ("cpu", "memory") or name.startswith("gpu")
            ]
            parts.append(f"{host}: " + ", ".join(shown))
        return RuleResult(NO_ISSUES_FOUND, "; ".join(parts), "", evidence)
