"""``trainops cost NAME``: a job's cost advice, as text (or its JSON with ``--json``).

The figures are the API's (``GET /jobs/{name}/cost``, or the home's store with no server
running); this module only words them. Every spot figure says whether it is the catalog's
estimate or the user's own price, so an estimate never reads as a quote.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trainops.cli._render import APPROX, TIMES, format_money
from trainops.client import format_time, read_jobs, resolve_job_name

__all__ = ["cost", "format_cost_advice"]


def cost(args: argparse.Namespace) -> int:
    with read_jobs() as reader:
        name = resolve_job_name(reader, args.name)
        data = reader.job_cost(name, args.interruptions_per_hour, args.checkpoint_seconds)
    print(json.dumps(data, indent=2) if args.json else format_cost_advice(data))
    return 0


def format_cost_advice(data: dict[str, Any]) -> str:
    """The advice as lines of text: cost, interruptions, checkpoint interval."""
    return "\n".join([*_heading(data), *_costs(data), *_interruptions(data), *_interval(data)])


def _heading(data: dict[str, Any]) -> list[str]:
    spot = data["EnableManagedSpotTraining"]
    kind = "a spot job, billed at the spot rate" if spot else "an on-demand job"
    state = "running, so far" if data["Running"] else data["TrainingJobStatus"]
    lines = [f"{data['TrainingJobName']} ({state}; {kind})"]
    billed, whole = data["BillableTimeInSeconds"], data["TrainingTimeInSeconds"]
    saving = data.get("SavingsPercent")
    tail = f": savings {saving:.1f} % (1 - billable / training)" if saving is not None else ""
    lines.append(f"  billable {billed:.0f} s of {whole:.0f} s training{tail}")
    return lines


def _costs(data: dict[str, Any]) -> list[str]:
    prices, count = data["Prices"], data["InstanceCount"]
    kind = "your price" if prices["SpotPriceKind"] == "yours" else "an estimate, not a quote"
    return [
        f"  on-demand {APPROX} ${format_money(data['OnDemandCostUsd'])} ({prices['InstanceType']} "
        f"{TIMES} {count} at ${prices['OnDemandUsdPerHour']:g}/h, "
        f"prices as of {prices['OnDemandPricesAsOf']})",
        f"  spot      {APPROX} ${format_money(data['SpotCostUsd'])} (at ${prices['SpotUsdPerHour']:g}/h: "
        f"{kind}; {prices['SpotPriceSource']})",
    ]


def _interruptions(data: dict[str, Any]) -> list[str]:
    found = data["Interruptions"]
    lines = [f"  interruptions: {len(found)}"]
    for number, item in enumerate(found, 1):
        lines.append(f"    {number}. {format_time(item['At'])}: {_lost(item)}; {_restart(item)}")
    if found:
        lines.append(
            f"  lost work {_seconds(data['LostSeconds'])} s ({APPROX} "
            f"${format_money(data['LostCostUsd'])}), restart overhead {_seconds(data['RestartSeconds'])} s"
        )
    problems = data["CheckpointSyncProblems"]
    trouble = f", {problems} failed or incomplete" if problems else ""
    lines.append(f"  checkpoints: {data['CheckpointsSynced']} synced{trouble}")
    return lines


def _lost(item: dict[str, Any]) -> str:
    lost = f"lost {_seconds(item['LostSeconds'])} s of work"
    if item["SavedAt"] is None:
        return f"{lost} (no checkpoint synced in that attempt)"
    return f"{lost} (since the checkpoint written {format_time(item['SavedAt'])})"


def _restart(item: dict[str, Any]) -> str:
    if item["RestartSeconds"] is None:
        return "not training again yet"
    resumed = "from a checkpoint" if item["ResumedFromCheckpoint"] else "from scratch"
    return f"training again {_seconds(item['RestartSeconds'])} s later, {resumed}"


def _interval(data: dict[str, Any]) -> list[str]:
    advice = data["CheckpointInterval"]
    rate, cost_s = advice["InterruptionsPerHour"], advice["CheckpointSeconds"]
    if cost_s is None:
        return [
            "  checkpoint interval: the checkpoint records do not measure how long writing one "
            "takes; give --checkpoint-seconds"
        ]
    if rate is None:
        return [
            f"  checkpoint interval: writing one takes {cost_s:g} s; give "
            "--interruptions-per-hour for the interval that costs least"
        ]
    source = "given" if advice["RateFrom"] == "given" else "as this job saw"
    measured = "given" if advice["CheckpointSecondsFrom"] == "given" else "measured"
    lines = [
        f"  checkpoint interval (Young/Daly, {rate:g} interruptions/h {source}; "
        f"C = {cost_s:g} s to write one ({measured}), R = {advice['RestartSeconds']:g} s to "
        "restart):"
    ]
    if advice["IntervalSeconds"] is not None:
        lines.append(_interval_line("now ", advice["IntervalSeconds"], advice["Overhead"],
                                    advice["ExpectedLostSeconds"]))  # fmt: skip
    else:
        lines.append("    now  unknown: the records show no two checkpoints of one attempt")
    lines.append(_interval_line("best", advice["BestIntervalSeconds"], advice["BestOverhead"],
                                advice["BestExpectedLostSeconds"]))  # fmt: skip
    return lines


def _interval_line(label: str, interval: float, overhead: float, lost: float) -> str:
    return (
        f"    {label} every {_seconds(interval)} s: overhead {overhead:.1%}, "
        f"{APPROX} {_seconds(lost)} s lost per interruption"
    )


def _seconds(value: float) -> str:
    """Whole seconds, tenths below ten, hundredths below one (a lost 0.4 s is not 0, an
    interval of 0.34 s is not 0)."""
    if 0 < value < 1:
        return f"{value:.2f}"
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"
