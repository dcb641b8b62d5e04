"""What the rules share: percentiles, system snapshots (rows within 20 ms grouped), per-host verdicts.

Pure Python on purpose: a rule scans at most a few hundred thousand numbers a minute, and the
control plane stays free of numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainops.profiler import Series, numbered
from trainops.rules._base import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    ProfilerData,
    RuleResult,
)

__all__ = [
    "SNAPSHOT_SECONDS",
    "SystemTable",
    "combine_hosts",
    "fmt",
    "mean",
    "no_gpu",
    "no_system_data",
    "percentile",
    "pstdev",
    "quantiles",
    "system_table",
]

#: System samples closer than this are one snapshot (reference/sagemaker.md §6.2).
SNAPSHOT_SECONDS = 0.020


def finite(values: Iterable[float]) -> list[float]:
    isfinite = math.isfinite
    return [v for v in values if isfinite(v)]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of the finite ``values`` (linear, as numpy's default); NaN if none."""
    return quantiles(values, (q,))[0]


def quantiles(values: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Several percentiles of the finite ``values``, sorting them once."""
    data = sorted(finite(values))
    if not data:
        return [math.nan for _ in qs]
    found = []
    for q in qs:
        position = (len(data) - 1) * q / 100.0
        low = math.floor(position)
        high = min(low + 1, len(data) - 1)
        found.append(data[low] + (data[high] - data[low]) * (position - low))
    return found


def mean(values: Sequence[float]) -> float:
    data = finite(values)
    return sum(data) / len(data) if data else math.nan


def pstdev(values: Sequence[float]) -> float:
    """Population standard deviation of the finite values (numpy's ``std``)."""
    data = finite(values)
    if not data:
        return math.nan
    centre = sum(data) / len(data)
    return math.sqrt(sum((v - centre) ** 2 for v in data) / len(data))


def fmt(value: float, digits: int = 1) -> str:
    """A number for a details line: ``23.4``, or ``n/a`` for NaN."""
    if math.isnan(value):
        return "n/a"
    return f"{value:.{digits}f}"


@dataclass(frozen=True, slots=True)
class SystemTable:
    """One host's system snapshots, column by column (``time`` first)."""

    columns: dict[str, list[float]]

    def __len__(self) -> int:
        return len(self.columns.get("time", []))

    def get(self, name: str) -> list[float]:
        return self.columns.get(name, [])

    @property
    def gpus(self) -> dict[int, str]:
        """GPU number -> utilization column, for GPUs with at least one value."""
        found = numbered(list(self.columns), "gpu")
        return {i: c for i, c in found.items() if any(map(math.isfinite, self.columns[c]))}

    def gpu_memory(self, index: int) -> list[float]:
        return self.get(f"gpu{index}_memory")

    @property
    def cpu(self) -> list[float]:
        """Whole-host CPU utilization per snapshot: ``cpu``, else the mean of the cores."""
        total = self.columns.get("cpu")
        if total and any(map(math.isfinite, total)):
            return total
        cores = [self.columns[c] for c in numbered(list(self.columns), "cpu").values()]
        if not cores:
            return []
        return [mean(values) for values in zip(*cores, strict=True)]

    def tail(self, skip: int, window: int | None = None) -> SystemTable:
        """The snapshots after the first ``skip``, only the last ``window`` of them if given."""
        start = skip
        if window is not None:
            start = max(skip, len(self) - window)
        return SystemTable({k: v[start:] for k, v in self.columns.items()})


def system_table(data: ProfilerData, host: str) -> SystemTable:
    """``host``'s system series as snapshots (rows within 20 ms merged), cached per view."""
    found = data.system.get(host)
    key = ("system", host, id(found), len(found) if found is not None else 0)
    cached = data.cache.get(key)
    if cached is None:
        cached = _group(found) if found is not None else SystemTable({"time": []})
        data.cache[key] = cached
    assert isinstance(cached, SystemTable)
    return cached


def _group(series: Series) -> SystemTable:
    width = len(series.columns)
    merged: list[list[float]] = []
    for row in series.rows:
        if merged and row[0] - merged[-1][0] <= SNAPSHOT_SECONDS:
            last = merged[-1]
            for i in range(1, width):
                if math.isnan(last[i]):
                    last[i] = row[i]
        else:
            merged.append(list(row))
    columns = {name: [row[i] for row in merged] for i, name in enumerate(series.columns)}
    return SystemTable(columns)


def no_system_data(data: ProfilerData) -> RuleResult:
    return RuleResult(IN_PROGRESS, "no system metrics were recorded yet", "", {"hosts": 0})


def no_gpu(data: ProfilerData, host: str) -> RuleResult:
    """``host`` recorded no GPU metrics: nothing for a GPU rule to find there."""
    status = (data.meta.get(host) or {}).get("gpu_status")
    why = f" ({status})" if isinstance(status, str) and status and status != "nvml" else ""
    return RuleResult(NO_ISSUES_FOUND, f"no GPU metrics were recorded{why}", "", {"gpus": 0})


def combine_hosts(results: Mapping[str, RuleResult]) -> RuleResult:
    """One verdict from per-host ones: IssuesFound if any host found issues, else InProgress if
    any host waits for data, else NoIssuesFound; details name each host, evidence is by host."""
    if not results:
        return RuleResult(IN_PROGRESS, "no system metrics were recorded yet", "", {})
    evidence = {host: result.evidence for host, result in results.items()}
    for status in (ISSUES_FOUND, IN_PROGRESS, NO_ISSUES_FOUND):
        chosen = {h: r for h, r in results.items() if r.status == status}
        if chosen:
            break
    details = "; ".join(f"{h}: {r.details}" for h, r in chosen.items())
    if len(results) == 1:
        details = next(iter(chosen.values())).details
    advice = next((r.recommendation for r in chosen.values() if r.recommendation), "")
    return RuleResult(status, details, advice, evidence)
