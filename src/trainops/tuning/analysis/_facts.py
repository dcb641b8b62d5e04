"""What the analysis of a tuning job reads: each trial's facts, gathered by whoever holds them.

The tuner reads them from the store (``trainops.tuner``); a test or a notebook can write them by
hand. Nothing here touches a store or a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainops.tuning._records import TunedValue

__all__ = ["TrialFacts"]


@dataclass(frozen=True)
class TrialFacts:
    """One trial as the analysis sees it.

    ``status`` is its TrainingJobStatus; ``objective`` the value it counts with (Completed, or
    Stopped with its last value); ``steps`` how many intermediate objective values it reported
    (one per epoch for a script that reports each epoch); ``early_stopped`` whether the search's
    rule (Hyperband, the median rule) stopped it. ``seconds`` and ``cost_usd`` cover every
    training job of the trial (a retried trial's earlier tries too); ``usd_per_second`` is the
    rate of its instances; ``seconds_per_step`` its measured pace, where known.
    """

    number: int
    training_job: str
    status: str
    hyperparameters: Mapping[str, TunedValue]
    objective: float | None = None
    steps: int = 0
    early_stopped: bool = False
    seconds: float = 0.0
    cost_usd: float = 0.0
    usd_per_second: float = 0.0
    seconds_per_step: float | None = None
    earlier_jobs: tuple[str, ...] = field(default=())
