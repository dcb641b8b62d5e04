"""Dataloader: DataLoader worker processes far fewer or far more than the host's CPU cores.

A rank's worker count is the largest ``workers`` of its DataLoaders (each iterator start is a
row; a count needs no warm-up): the training loader is the one that keeps workers busy, while an
evaluation loader with ``num_workers=0`` beside it runs in the training process and must not
halve the count. A host's count is the sum over its ranks (the processes that run in parallel
there). The rule fires when that is below ``min_threshold`` % or above ``max_threshold`` % of the
host's cores (``meta/<host>.json``). Fetch times after the first ``patience`` rows of each rank
are reported as evidence.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from trainops.rules._base import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    ProfilerData,
    ProfilerRule,
    RuleResult,
)
from trainops.rules._stats import combine_hosts, finite, percentile

__all__ = ["Dataloader", "host_workers"]


def host_workers(data: ProfilerData) -> dict[str, dict[int, float]]:
    """host -> rank -> the rank's largest ``workers``, for ranks that recorded any."""
    found: dict[str, dict[int, float]] = defaultdict(dict)
    for (host, rank), series in sorted(data.dataloader.items()):
        counts = finite(series.column("workers"))
        if counts:
            found[host][rank] = max(counts)
    return dict(found)


class Dataloader(ProfilerRule):
    name = "Dataloader"

    def _evaluate(self, data: ProfilerData) -> RuleResult:
        workers = host_workers(data)
        if not workers:
            return RuleResult(IN_PROGRESS, "no dataloader worker count was recorded yet", "", {})
        results = {host: self._host(data, host, ranks) for host, ranks in workers.items()}
        return combine_hosts(results)

    def _host(self, data: ProfilerData, host: str, ranks: dict[int, float]) -> RuleResult:
        total = sum(ranks.values())
        cores = (data.meta.get(host) or {}).get("cores")
        evidence: dict[str, Any] = {"workers": total, "ranks": len(ranks), "cores": cores}
        evidence |= self._fetch(data, host)
        if not isinstance(cores, int | float) or isinstance(cores, bool) or cores <= 0:
            line = f"{total:g} workers; the host's core count is not known (no meta/{host}.json)"
            return RuleResult(IN_PROGRESS, line, "", evidence)
        share = 100.0 * total / cores
        evidence["percent_of_cores"] = share
        line = f"{total:g} dataloader workers on {cores:g} cores ({share:.0f} %)"
        low, high = self.number("min_threshold"), self.number("max_threshold")
        if share < low:
            advice = (
                f"Raise DataLoader num_workers: {total:g} workers use {share:.0f} % of the "
                f"{cores:g} cores (< {low:g} %); about {_per_rank(cores * low / 100, ranks)} per "
                "rank would keep the training loop fed."
            )
            return RuleResult(ISSUES_FOUND, f"{line} < {low:g} %", advice, evidence)
        if share > high:
            advice = (
                f"Lower DataLoader num_workers to at most {_per_rank(cores, ranks)} per rank: "
                f"{total:g} workers on {cores:g} cores ({share:.0f} % > {high:g} %) compete for "
                "the CPU and memory."
            )
            return RuleResult(ISSUES_FOUND, f"{line} > {high:g} %", advice, evidence)
        return RuleResult(NO_ISSUES_FOUND, line, "", evidence)

    def _fetch(self, data: ProfilerData, host: str) -> dict[str, Any]:
        patience = self.whole("patience")
        fetches: list[float] = []
        for (where, _), series in data.dataloader.items():
            if where == host:
                fetches += finite(series.column("fetch")[patience:])
        if not fetches:
            return {}
        return {
            "fetches": len(fetches),
            "fetch_p50": percentile(fetches, 50),
            "fetch_p95": percentile(fetches, 95),
            "fetch_max": max(fetches),
        }


def _per_rank(workers: float, ranks: dict[int, float]) -> int:
    return max(1, int(workers // max(1, len(ranks))))
