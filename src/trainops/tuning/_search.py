"""The search of one tuning job: what to try next, when to stop a trial, when the job is done.

A :class:`Search` holds no state of its own worth saving: it is rebuilt from the job's trial
records (and its warm-start parents' records) whenever the tuner starts, and given the same
records and seed it proposes the same next trials as a search that never stopped.

The tuner drives it::

    search = Search(config, records, parents=parent_records)
    proposal = search.ask()                 # None: no further trial to start
    search.should_stop(n, epoch, value)     # after each intermediate objective value
    search.tell(n, TrialStatus.COMPLETED, objective)
    search.completed(records)               # why the job is complete, or None
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from trainops.tuning._completion import (
    CompletionDetails,
    CompletionReason,
    best_trial,
    completion_details,
    completion_reason,
)
from trainops.tuning._config import TuningJobConfig
from trainops.tuning._engine import Engine
from trainops.tuning._limits import ObjectiveType
from trainops.tuning._records import Proposal, TrialRecord, TrialStatus, TunedValue
from trainops.tuning._space import sagemaker_string
from trainops.tuning._strategies import strategy_for

__all__ = ["OBJECTIVE_HYPERPARAMETER", "Search"]

# The static hyperparameter SageMaker adds to every trial: the objective metric's name.
OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"
DEFAULT_STUDY_NAME = "tuning"


class Search:
    """Ask-and-tell search over ``config``'s ranges, rebuilt from ``records``.

    ``records`` are this job's trials (numbered from 0 in proposal order); ``parents`` are the
    warm-start parents' trials, learnt from as prior trials (those outside this job's ranges
    are left out). ``name`` seeds the search when the config has no ``random_seed``. A search
    is used by one thread at a time (the tuner's).
    """

    def __init__(
        self,
        config: TuningJobConfig,
        records: Sequence[TrialRecord] = (),
        parents: Sequence[TrialRecord] = (),
        name: str | None = None,
    ) -> None:
        self.config = config
        study_name = name or config.tuning_job_name or DEFAULT_STUDY_NAME
        seed = config.random_seed
        if seed is None:
            seed = zlib.crc32(study_name.encode())
        self._strategy = strategy_for(config, study_name)
        self._rule = self._strategy.stopping_rule()
        maximize = config.objective.type is ObjectiveType.MAXIMIZE
        self._engine = Engine(config.hyperparameter_ranges, self._strategy, maximize, seed)
        self._records: dict[int, TrialRecord] = {}
        self.priors = sum(self._engine.add_prior(record) for record in parents)
        for record in sorted(records, key=lambda r: r.number):
            self._add(record)

    def _add(self, record: TrialRecord) -> None:
        if record.number in self._records:
            raise ValueError(f"trial {record.number} is recorded twice")
        if record.number != len(self._records):
            raise ValueError(
                f"trial numbers must count from 0 without gaps; got {record.number} after "
                f"{len(self._records)} trials"
            )
        self._engine.replay(record)
        self._records[record.number] = record

    @property
    def records(self) -> list[TrialRecord]:
        """This job's trials as the search knows them, in number order."""
        return [self._records[n] for n in sorted(self._records)]

    @property
    def stops_early(self) -> bool:
        """Whether a rule may stop trials early (Hyperband, or the median rule with early
        stopping ``Auto``): without one, :meth:`should_stop` only records a value."""
        return self._rule is not None

    def ask(self) -> Proposal | None:
        """The next trial to start, or ``None`` when the job limit (or Grid) is reached."""
        number = len(self._records)
        capacity = self._strategy.capacity()
        if number >= self.config.max_training_jobs or (capacity is not None and number >= capacity):
            return None
        values = self._engine.ask(number)
        proposal = Proposal(number=number, hyperparameters=values)
        self._records[number] = proposal.record()
        return proposal

    def should_stop(self, trial: int, step: int, value: float) -> bool:
        """Record trial ``trial``'s objective ``value`` at ``step`` (an epoch, from 1) and say
        whether the trial should stop now (Hyperband, or the median rule with early stopping
        ``Auto``). A step already recorded keeps its first value."""
        record = self._running(trial)
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"trial {trial}: a step is a whole number from 0, not {step!r}")
        curve = dict(record.intermediate_values)
        curve.setdefault(step, float(value))
        record = dataclasses.replace(record, intermediate_values=curve)
        self._records[trial] = record
        self._engine.report(trial, step, float(value))
        if self._rule is None:
            return False
        others = [r for n, r in self._records.items() if n != trial]
        return self._rule.should_stop(record, step, others)

    def tell(self, trial: int, status: TrialStatus, objective: float | None = None) -> None:
        """Trial ``trial`` ended as ``status`` with final ``objective`` (for Stopped, ``None``
        keeps its last intermediate value)."""
        if not status.finished:
            raise ValueError(f"trial {trial}: tell() takes a finished status, not {status}")
        record = self._running(trial)
        self._records[trial] = dataclasses.replace(record, status=status, objective=objective)
        self._engine.tell(trial, status, objective)

    def _running(self, trial: int) -> TrialRecord:
        record = self._records.get(trial)
        if record is None:
            raise ValueError(f"trial {trial} was never proposed ({len(self._records)} so far)")
        if record.status.finished:
            raise ValueError(f"trial {trial} has already ended ({record.status})")
        return record

    def completed(self, records: Sequence[TrialRecord] | None = None) -> CompletionReason | None:
        """Why the job is complete given ``records`` (default: the search's own), or ``None``."""
        return completion_reason(self.config, self.records if records is None else records)

    def completion_details(self, records: Sequence[TrialRecord] | None = None) -> CompletionDetails:
        """Progress towards the completion criteria (``TuningJobCompletionDetails``)."""
        return completion_details(self.config, self.records if records is None else records)

    def best(self, records: Sequence[TrialRecord] | None = None) -> TrialRecord | None:
        """The best trial so far (Completed or Stopped with an objective)."""
        return best_trial(self.records if records is None else records, self.config.objective.type)

    def training_hyperparameters(self, proposal: Proposal) -> dict[str, Any]:
        """Every hyperparameter a trial's training job gets: the static ones (Hyperband's
        resource at its maximum) and the tuned ones. The tuner adds
        :data:`OBJECTIVE_HYPERPARAMETER` (reserved in job specs)."""
        return {**self.config.static_hyperparameters, **proposal.hyperparameters}

    @staticmethod
    def sagemaker_strings(hyperparameters: Mapping[str, TunedValue]) -> dict[str, str]:
        """The tuned values as the strings SageMaker's API passes (``HyperParameters``)."""
        return {name: sagemaker_string(value) for name, value in hyperparameters.items()}
