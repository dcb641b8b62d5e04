"""The report page's cost section: the job's cost advice (``trainops.cost.SpotCost.to_json``).

The same figures as ``trainops cost`` (docs/spot.md#cost): cost on-demand and at spot (the spot
price labelled an estimate unless it is the user's), each interruption's lost work and restart
overhead, and the checkpoint interval at the rate the job saw. Every string is escaped.
"""

from __future__ import annotations

from typing import Any

from trainops.report._markup import e as _e
from trainops.report._markup import number as _n
from trainops.report._markup import table as _table

__all__ = ["cost_section"]


def cost_section(cost: dict[str, Any] | None) -> str:
    """The section's markup; a line saying why where the report has no cost data."""
    if not cost:
        return '<p class="none">no cost data in this report</p>'
    return _prices(cost) + _interruptions(cost) + _interval(cost["CheckpointInterval"])


def _prices(cost: dict[str, Any]) -> str:
    prices = cost["Prices"]
    spot_kind = "your price" if prices["SpotPriceKind"] == "yours" else "an estimate, not a quote"
    rows = [
        [_e("on-demand"), _n(prices["OnDemandUsdPerHour"]), _n(cost["OnDemandCostUsd"]),
         _e(f"catalog, {prices['Region']}, as of {prices['OnDemandPricesAsOf']}")],
        [_e("spot"), _n(prices["SpotUsdPerHour"]), _n(cost["SpotCostUsd"]),
         _e(f"{spot_kind}: {prices['SpotPriceSource']}")],
    ]  # fmt: skip
    savings = cost.get("SavingsPercent")
    head = (f"<p>{_n(cost['BillableTimeInSeconds'], 6)} billable seconds of "
            f"{_n(cost['TrainingTimeInSeconds'], 6)} training seconds &times; "
            f"{_e(cost['InstanceCount'])} instance(s)"
            + (f"; savings {_n(savings, 3)} %" if savings is not None else "") + ".</p>")  # fmt: skip
    return head + _table(["price", "USD per hour", "USD", "source"], rows)


def _interruptions(cost: dict[str, Any]) -> str:
    found = cost["Interruptions"]
    if not found:
        return f"<p>No interruptions; {_e(cost['CheckpointsSynced'])} checkpoint(s) synced.</p>"
    rows = [[_e(i["At"]), _n(i["LostSeconds"], 6), _n(i["RestartSeconds"], 6),
             _n(i["ResumedFromCheckpoint"]), _e(i["Message"])] for i in found]  # fmt: skip
    tail = (f"<p>Lost work {_n(cost['LostSeconds'], 6)} s ({_n(cost['LostCostUsd'])} USD), "
            f"restart overhead {_n(cost['RestartSeconds'], 6)} s; "
            f"{_e(cost['CheckpointsSynced'])} checkpoint(s) synced, "
            f"{_e(cost['CheckpointSyncProblems'])} failed or incomplete.</p>")  # fmt: skip
    header = ["interrupted at", "lost s", "restart s", "resumed from a checkpoint", "message"]
    return _table(header, rows) + tail


def _interval(advice: dict[str, Any]) -> str:
    if advice["BestIntervalSeconds"] is None:
        why = ("no synced checkpoint says how long writing one takes"
               if advice["CheckpointSeconds"] is None else "no interruption rate to plan for")  # fmt: skip
        return f'<p class="none">Checkpoint interval: {_e(why)}.</p>'
    rows = [[_e(label), _n(seconds), _n(overhead), _n(lost)]
            for label, seconds, overhead, lost in (
                ("now", advice["IntervalSeconds"], advice["Overhead"], advice["ExpectedLostSeconds"]),
                ("best (Young/Daly)", advice["BestIntervalSeconds"], advice["BestOverhead"],
                 advice["BestExpectedLostSeconds"]))
            if seconds is not None]  # fmt: skip
    head = (f"<p>At {_n(advice['InterruptionsPerHour'])} interruptions per hour "
            f"({_e(advice['RateFrom'])}); writing a checkpoint takes "
            f"{_n(advice['CheckpointSeconds'])} s, a restart {_n(advice['RestartSeconds'])} s: "
            "tau* = sqrt(2 C M).</p>")  # fmt: skip
    header = [
        "checkpoint interval",
        "seconds",
        "overhead (share of time)",
        "lost s per interruption",
    ]
    return head + _table(header, rows)
