"""The cheapest configuration of a scaling study that meets a deadline, on-demand and at spot,
and scale-up (one host) against scale-out (several).

A configuration's time is what it needed: its time to the study's target where there is one
(the job could stop there), else its billable seconds. Its cost is that time x price per hour
/ 3600 x instance count. On-demand it takes that time; at spot it takes longer by
``spot_overhead`` (the share of time interruptions add: their lost work, restarts and waits;
``trainops cost`` measures it for a job that ran on spot, as ``Overhead``), at the spot price
(the catalog's estimate unless the user gave theirs). A configuration meets the deadline when
its time (on spot: with the overhead) is at most the deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from trainops.cost._interval import SECONDS_PER_HOUR
from trainops.cost._prices import Prices
from trainops.cost._study import StudyRun

__all__ = ["DeadlineChoice", "DeadlineOption", "choose_for_deadline", "render_deadline"]


@dataclass(frozen=True, slots=True)
class DeadlineOption:
    """One configuration run one way (``spot`` or not): its time and cost."""

    run: StudyRun
    spot: bool
    seconds: float
    usd: float
    price_kind: str  # "on-demand", or the spot price's kind ("estimate" / "yours")

    def to_json(self) -> dict[str, object]:
        return {"label": self.run.label, "job_name": self.run.job_name, "spot": self.spot,
                "seconds": round(self.seconds, 3), "usd": round(self.usd, 6),
                "price_kind": self.price_kind}  # fmt: skip


@dataclass(frozen=True, slots=True)
class DeadlineChoice:
    """The cheapest options that meet ``deadline`` seconds, and the configurations that miss it."""

    deadline: float
    spot_overhead: float
    on_demand: DeadlineOption | None
    spot: DeadlineOption | None
    scale_up: DeadlineOption | None  # the cheapest on one host (either way of paying)
    scale_out: DeadlineOption | None  # the cheapest on several hosts
    missed: tuple[StudyRun, ...]  # not even on-demand in time (or never finished)

    def to_json(self) -> dict[str, object]:
        def shown(option: DeadlineOption | None) -> dict[str, object] | None:
            return None if option is None else option.to_json()

        return {"deadline_s": self.deadline, "spot_overhead": self.spot_overhead,
                "cheapest_on_demand": shown(self.on_demand), "cheapest_spot": shown(self.spot),
                "cheapest_scale_up": shown(self.scale_up),
                "cheapest_scale_out": shown(self.scale_out),
                "missed": [r.label for r in self.missed]}  # fmt: skip


def choose_for_deadline(
    runs: Sequence[StudyRun],
    deadline: float,
    prices: Callable[[str], Prices],
    spot_overhead: float,
) -> DeadlineChoice:
    """The cheapest of ``runs`` within ``deadline`` seconds; ``prices`` gives a type's prices."""
    options = [o for run in runs for o in _options(run, prices, spot_overhead)]
    meeting = [o for o in options if o.seconds <= deadline]
    in_time = {id(o.run) for o in meeting if not o.spot}
    return DeadlineChoice(
        deadline=deadline,
        spot_overhead=spot_overhead,
        on_demand=_cheapest(o for o in meeting if not o.spot),
        spot=_cheapest(o for o in meeting if o.spot),
        scale_up=_cheapest(o for o in meeting if o.run.instance_count == 1),
        scale_out=_cheapest(o for o in meeting if o.run.instance_count > 1),
        missed=tuple(r for r in runs if id(r) not in in_time),
    )


def _options(
    run: StudyRun, prices: Callable[[str], Prices], spot_overhead: float
) -> list[DeadlineOption]:
    needed = _needed_seconds(run)
    if needed is None:
        return []
    price = prices(run.instance_type)
    spot_seconds = needed * (1.0 + spot_overhead)
    return [
        DeadlineOption(run, False, needed, _usd(needed, price.on_demand_usd_per_hour, run),
                       "on-demand"),
        DeadlineOption(run, True, spot_seconds, _usd(spot_seconds, price.spot_usd_per_hour, run),
                       price.spot_kind),
    ]  # fmt: skip


def _needed_seconds(run: StudyRun) -> float | None:
    """Its time to the target, else (no target) its billable seconds; None: it did neither."""
    if run.time_to_target_s is not None:
        return run.time_to_target_s
    if run.status == "Completed" and run.billable_seconds is not None:
        return float(run.billable_seconds)
    return None


def _usd(seconds: float, usd_per_hour: float, run: StudyRun) -> float:
    return seconds / SECONDS_PER_HOUR * usd_per_hour * run.instance_count


def _cheapest(options: Iterable[DeadlineOption]) -> DeadlineOption | None:
    found = list(options)
    return min(found, key=lambda o: (o.usd, o.seconds)) if found else None


def render_deadline(choice: DeadlineChoice, target: str | None) -> str:
    """The choice as lines of text under the study's table."""
    what = f"to {target}" if target else "to the end of the job"
    lines = [f"Deadline {choice.deadline:g} s ({what}; spot takes "
             f"{choice.spot_overhead:.0%} longer for its interruptions):"]  # fmt: skip
    for label, option in (("cheapest on-demand", choice.on_demand),
                          ("cheapest spot", choice.spot),
                          ("scale-up (1 host)", choice.scale_up),
                          ("scale-out (hosts)", choice.scale_out)):  # fmt: skip
        lines.append(f"  {label:<19} {_option_text(option)}")
    if choice.missed:
        lines.append(f"  missed: {'; '.join(r.label for r in choice.missed)}")
    return "\n".join(lines)


def _option_text(option: DeadlineOption | None) -> str:
    if option is None:
        return "none in time"
    how = "spot" if option.spot else "on-demand"
    kind = ", an estimate" if option.price_kind == "estimate" else ""
    return f"{option.run.label}, {how}: {option.seconds:.0f} s, ${option.usd:.6f}{kind}"
