"""The summaries of a tuning job's settled trials, kept between describes.

``trainops tune`` describes its tuning job every second, and a describe summarised every trial:
a trial row, then each of its training jobs' rows (for its start time and its cost), at 500
trials ~30 ms of the server's CPU a second on a quiet machine, several times that under load,
taken from the trials still running. A settled trial (ended, not to be tried again: see
``_settled``) whose training jobs have all ended and been billed never changes again (a job's
billable seconds are final once set, and the tuning job's config is fixed), so its summary is
kept, and each describe reads only the rows of the trials that are not settled yet and the jobs
of those. The store stays the only source of truth: what is kept is what it held, keyed by the
store's file and the tuning job's name and creation time (a tuning job made again under the same
name is another), for a few tuning jobs at a time, and a describe hands out copies.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainops.store import JobRecord, MetadataStore, TuningJobRecord, TuningTrialRecord
from trainops.tuner._settled import SettledTrials, settled

__all__ = ["KEPT_TUNING_JOBS", "SummaryCache", "final"]

#: How many tuning jobs' settled summaries are kept (the least recently described go first):
#: about 1 MB for 500 trials, so at most ~13 MB at the limit of 750 trials a tuning job.
KEPT_TUNING_JOBS = 8

_ENDED_JOB = frozenset({"Completed", "Failed", "Stopped"})

Summarise = Callable[[TuningTrialRecord], tuple[dict[str, Any], list[JobRecord]]]


def final(trial: TuningTrialRecord, jobs: list[JobRecord]) -> bool:
    """Whether ``trial``'s summary can no longer change: it is settled, and each of its
    training jobs ended and was billed."""
    return settled(trial) and all(
        job.status in _ENDED_JOB and job.billable_seconds is not None for job in jobs
    )


@dataclass
class _Kept:
    """One tuning job's settled trials and the summaries of the final ones."""

    trials: SettledTrials = field(default_factory=SettledTrials)
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)


class SummaryCache:
    """Settled trials' summaries of up to :data:`KEPT_TUNING_JOBS` tuning jobs."""

    def __init__(self, size: int = KEPT_TUNING_JOBS) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[str, str, float], _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def summarise(
        self, store: MetadataStore, tuning: TuningJobRecord, summarise: Summarise
    ) -> tuple[list[TuningTrialRecord], list[dict[str, Any]]]:
        """Every trial of ``tuning`` by number and its summary (a copy, the caller's to
        change), ``summarise`` called only for the trials whose summary is not kept."""
        key = (str(store.path), tuning.name, tuning.creation_time)
        with self._lock:
            kept = self._kept.pop(key, None) or _Kept()
            self._kept[key] = kept
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
            trials = kept.trials.read(store, tuning.name)
            summaries = []
            for trial in trials:
                summary = kept.summaries.get(trial.number)
                if summary is None:
                    summary, jobs = summarise(trial)
                    if final(trial, jobs):
                        kept.summaries[trial.number] = summary
                summaries.append(_copy(summary))
        return trials, summaries


def _copy(summary: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``summary`` sharing nothing mutable with it (its values are plain values,
    dicts of them, or lists of such dicts)."""
    return {key: _copy_value(value) for key, value in summary.items()}


def _copy_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    return value
