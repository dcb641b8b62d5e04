"""The checkpoint interval that costs least at a given interruption rate (Young/Daly).

With a checkpoint every ``tau`` seconds that blocks the script for ``C`` seconds, a restart that
takes ``R`` seconds and a mean time ``M`` between interruptions, each interruption loses about
``tau / 2 + R`` and the share of time spent on other than new work is about
``C / tau + (tau / 2 + R) / M``. The interval that makes it least is Young's
``tau* = sqrt(2 C M)`` (Young 1974; Daly 2006 refines it for large ``C / M``).

``C`` is given, or measured: the median time the script took writing a checkpoint's files, as
the checkpoint syncs saw it; ``tau`` is measured: the median time between the newest writes of
consecutive synced checkpoints of a host within one attempt (a host that reports only its last
sync of each attempt shows no interval).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from trainops.cost._interruptions import CheckpointLike

__all__ = ["IntervalAdvice", "advise_interval", "expected_overhead", "young_daly_interval"]

SECONDS_PER_HOUR = 3600.0
SAME_CHECKPOINT_SECONDS = 1.0  # newest writes closer than this are one checkpoint


def young_daly_interval(checkpoint_seconds: float, mean_between: float) -> float:
    """``sqrt(2 C M)``, seconds."""
    return math.sqrt(2.0 * checkpoint_seconds * mean_between)


def expected_overhead(
    interval: float, checkpoint_seconds: float, restart_seconds: float, mean_between: float
) -> float:
    """``C / tau + (tau / 2 + R) / M``: time spent on other than new work, per unit of time."""
    return checkpoint_seconds / interval + (interval / 2.0 + restart_seconds) / mean_between


@dataclass(frozen=True, slots=True)
class IntervalAdvice:
    """The measured checkpoint time and interval, and the best interval at ``per_hour``."""

    per_hour: float | None  # interruptions per hour (None: no rate given and none seen)
    rate_from: str  # "given", "this job" or "none"
    checkpoint_seconds: float | None  # C (None: not given, and no record measured it)
    checkpoint_from: str  # "given", "measured" or "none"
    restart_seconds: float  # R: this job's median restart overhead, 0 without interruptions
    interval: float | None  # the job's measured interval
    best_interval: float | None  # tau*
    overhead: float | None  # at the measured interval
    best_overhead: float | None  # at tau*
    lost_per_interruption: float | None  # tau / 2 + R at the measured interval
    best_lost_per_interruption: float | None  # tau* / 2 + R

    def to_json(self) -> dict[str, object]:
        return {
            "InterruptionsPerHour": self.per_hour,
            "RateFrom": self.rate_from,
            "CheckpointSeconds": _r(self.checkpoint_seconds),
            "CheckpointSecondsFrom": self.checkpoint_from,
            "RestartSeconds": _r(self.restart_seconds),
            "IntervalSeconds": _r(self.interval),
            "BestIntervalSeconds": _r(self.best_interval),
            "Overhead": _r(self.overhead, 4),
            "BestOverhead": _r(self.best_overhead, 4),
            "ExpectedLostSeconds": _r(self.lost_per_interruption),
            "BestExpectedLostSeconds": _r(self.best_lost_per_interruption),
        }


def advise_interval(
    checkpoints: Sequence[CheckpointLike],
    restarts: Sequence[float],
    per_hour: float | None,
    seen_per_hour: float | None,
    given_checkpoint_seconds: float | None = None,
) -> IntervalAdvice:
    """The advice at ``per_hour`` (given), else at the rate this job saw (``seen_per_hour``);
    with ``given_checkpoint_seconds`` as C, else C as the records measured it."""
    rate, rate_from = (per_hour, "given") if per_hour is not None else (seen_per_hour, "this job")
    if rate is None:
        rate_from = "none"
    cost, cost_from = given_checkpoint_seconds, "given"
    if cost is None:
        cost = checkpoint_seconds(checkpoints)
        cost_from = "none" if cost is None else "measured"
    restart = statistics.median(restarts) if restarts else 0.0
    interval = checkpoint_interval(checkpoints)
    best = overhead = best_overhead = None
    if rate and cost:
        mean_between = SECONDS_PER_HOUR / rate
        best = young_daly_interval(cost, mean_between)
        best_overhead = expected_overhead(best, cost, restart, mean_between)
        if interval:
            overhead = expected_overhead(interval, cost, restart, mean_between)
    return IntervalAdvice(
        per_hour=rate,
        rate_from=rate_from,
        checkpoint_seconds=cost,
        checkpoint_from=cost_from,
        restart_seconds=restart,
        interval=interval,
        best_interval=best,
        overhead=overhead,
        best_overhead=best_overhead,
        lost_per_interruption=None if interval is None else interval / 2 + restart,
        best_lost_per_interruption=None if best is None else best / 2 + restart,
    )


def checkpoint_seconds(checkpoints: Sequence[CheckpointLike]) -> float | None:
    """The median time the script took writing a synced checkpoint (None: never measured; a
    record of 0 s says the sync first saw the file after it was written, so it measured
    nothing)."""
    times = [r.write_seconds for r in checkpoints if r.kind == "synced" and r.write_seconds]
    return statistics.median(times) if times else None


def checkpoint_interval(checkpoints: Sequence[CheckpointLike]) -> float | None:
    """The median time between the newest writes of a host's consecutive synced checkpoints in
    one attempt (across attempts the gap would hold the restart). Files written less than
    :data:`SAME_CHECKPOINT_SECONDS` apart count as one checkpoint (a model and its optimizer's
    state saved side by side are recorded one file at a time)."""
    writes: dict[tuple[str, int], set[float]] = {}
    for record in checkpoints:
        if record.kind == "synced" and record.newest_write is not None:
            writes.setdefault((record.host, record.attempt), set()).add(record.newest_write)
    gaps = [
        b - a
        for times in writes.values()
        for a, b in itertools.pairwise(_checkpoints(sorted(times)))
    ]
    return statistics.median(gaps) if gaps else None


def _checkpoints(times: list[float]) -> list[float]:
    """Sorted write times grouped into checkpoints (each its newest write): a time within
    :data:`SAME_CHECKPOINT_SECONDS` of the one before belongs to the same checkpoint."""
    groups: list[float] = []
    for time in times:
        if groups and time - groups[-1] < SAME_CHECKPOINT_SECONDS:
            groups[-1] = time
        else:
            groups.append(time)
    return groups


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
