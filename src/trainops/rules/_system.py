"""A base for rules that judge each host's system metrics: patience, no data, one verdict per host."""

from __future__ import annotations

from abc import abstractmethod

from trainops.rules._base import IN_PROGRESS, ProfilerData, ProfilerRule, RuleResult
from trainops.rules._stats import SystemTable, combine_hosts, no_gpu, system_table

__all__ = ["SystemRule"]


class SystemRule(ProfilerRule):
    """Evaluates :meth:`_host` on every host's snapshots once more than ``patience`` of them
    were recorded (the first ``patience`` are skipped: warm-up), and combines the verdicts."""

    #: The rule needs GPU metrics: a host without any answers NoIssuesFound, saying so.
    needs_gpu: bool = True

    def _evaluate(self, data: ProfilerData) -> RuleResult:
        results = {}
        for host in sorted(data.system):
            table = system_table(data, host)
            results[host] = self._judge(data, host, table)
        return combine_hosts(results)

    def _judge(self, data: ProfilerData, host: str, table: SystemTable) -> RuleResult:
        if self.needs_gpu and not table.gpus and len(table):
            return no_gpu(data, host)
        patience = self.whole("patience") if "patience" in self.parameters else 0
        if len(table) <= patience:
            return RuleResult(
                IN_PROGRESS,
                f"{len(table)} system snapshots, not more than patience={patience}: nothing "
                "judged yet (a short job needs a lower patience)",
                "",
                {"snapshots": len(table), "patience": patience},
            )
        return self._host(host, table.tail(patience))

    @abstractmethod
    def _host(self, host: str, table: SystemTable) -> RuleResult:
        """The verdict on ``host``'s snapshots after patience (GPU metrics present if needed)."""
