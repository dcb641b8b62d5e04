"""Early-stopping rules over trials' intermediate (per-step) objective values.

Both rules are stateless: a decision is computed from the recorded curves alone, so a search
rebuilt from its records after a crash decides exactly as the uninterrupted one would.

- :class:`MedianRule` is SageMaker's ``TrainingJobEarlyStoppingType: Auto``: stop a trial whose
  value at a step is worse than the median of the running averages of the other finished
  trials up to that step.
- :class:`HyperbandRule` is Hyperband over asynchronous successive halving (Optuna's
  ``HyperbandPruner``: the same brackets, the same bracket of each trial, the same promotion
  test); a trial's value at a rung is its value at the first step at or past the rung, and a
  trial stopped at a rung does not compete at the next with the values it reported before its
  stop took effect.
"""

from __future__ import annotations

import binascii
import bisect
import math
import statistics
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from trainops.tuning._records import TrialRecord, TrialStatus

__all__ = ["MIN_MEDIAN_TRIALS", "HyperbandRule", "MedianRule", "StoppingRule"]

MIN_MEDIAN_TRIALS = 3  # the median rule waits for this many finished curves at a step


class StoppingRule(ABC):
    """Decides whether a running trial stops at a step."""

    def __init__(self, maximize: bool) -> None:
        self.maximize = maximize

    @abstractmethod
    def should_stop(self, trial: TrialRecord, step: int, others: Sequence[TrialRecord]) -> bool:
        """Whether ``trial`` (its curve holds ``step``) stops now, given the ``others``."""

    def worse(self, a: float, b: float) -> bool:
        """Whether ``a`` is strictly worse than ``b``."""
        return a < b if self.maximize else a > b


class MedianRule(StoppingRule):
    """Stop when worse than the median of the other finished trials' running averages."""

    def should_stop(self, trial: TrialRecord, step: int, others: Sequence[TrialRecord]) -> bool:
        value = trial.intermediate_values[step]
        if math.isnan(value):
            return True
        averages = [
            _running_average(other.intermediate_values, step)
            for other in others
            if other.number != trial.number
            and other.status in (TrialStatus.COMPLETED, TrialStatus.STOPPED)
            and other.intermediate_values
            and max(other.intermediate_values) >= step
        ]
        if len(averages) < MIN_MEDIAN_TRIALS:
            return False
        return self.worse(value, statistics.median(averages))


def _running_average(curve: Mapping[int, float], step: int) -> float:
    values = [v for s, v in curve.items() if s <= step and not math.isnan(v)]
    return statistics.fmean(values) if values else math.nan


class HyperbandRule(StoppingRule):
    """Hyperband: brackets of successive halving, each trial in one bracket by its number."""

    def __init__(
        self,
        maximize: bool,
        study_name: str,
        min_resource: int,
        max_resource: int,
        reduction_factor: int = 3,
    ) -> None:
        super().__init__(maximize)
        self.study_name = study_name
        self.min_resource = min_resource
        self.max_resource = max_resource
        self.eta = reduction_factor
        ratio = max_resource / min_resource
        self.n_brackets = math.floor(math.log(ratio, reduction_factor) + 1e-9) + 1
        self.budgets = [self._budget(b) for b in range(self.n_brackets)]

    def _budget(self, bracket: int) -> int:
        s = self.n_brackets - 1 - bracket
        return math.ceil(self.n_brackets * float(self.eta**s) / (s + 1))  # Optuna's allocation

    def bracket(self, number: int) -> int:
        """The bracket of trial ``number`` (Optuna's allocation by CRC32 of name and number)."""
        n = binascii.crc32(f"{self.study_name}_{number}".encode()) % sum(self.budgets)
        for bracket, budget in enumerate(self.budgets):
            n -= budget
            if n < 0:
                return bracket
        return self.n_brackets - 1

    def rung_steps(self, bracket: int) -> list[int]:
        """The steps at which a trial of ``bracket`` is compared (below the max resource)."""
        steps = []
        rung = 0
        while (step := self.min_resource * int(self.eta ** (bracket + rung))) < self.max_resource:
            steps.append(step)
            rung += 1
        return steps

    def should_stop(self, trial: TrialRecord, step: int, others: Sequence[TrialRecord]) -> bool:
        value = trial.intermediate_values[step]
        if math.isnan(value):
            return True
        bracket = self.bracket(trial.number)
        peers = [
            o for o in others if o.number != trial.number and self.bracket(o.number) == bracket
        ]
        rungs = self.rung_steps(bracket)
        decided = [
            rung
            for rung, rung_step in enumerate(rungs)
            if _rung_value_step(trial.intermediate_values, rung_step) == step
        ]  # the rungs this step decides (none, mostly: a rung is decided at one step)
        if not decided:
            return False
        entered = self._entered([*peers, trial], rungs)
        for rung in decided:
            competing = [
                v
                for p in peers
                if entered[p.number] > rung and (v := _rung_value(p, rungs[rung])) is not None
            ]
            if not self._promotable(value, [*competing, value]):
                return True
        return False

    def _entered(self, members: Sequence[TrialRecord], rungs: Sequence[int]) -> dict[int, int]:
        """How many of the ``rungs`` each trial of a bracket entered. A trial that ended
        Stopped may have gone on reporting until its stop took effect (a job's script learns of
        its stop a moment later): it entered rung ``k + 1`` only if its value at rung ``k`` was
        promotable against the trials numbered below it that had entered rung ``k`` (as a trial
        run one after another is judged), so the late values of a trial stopped at a rung do
        not compete at the next, as in Optuna, where a pruned trial reports nothing more. Any
        other trial entered every rung it reached (it was not stopped)."""
        ordered = sorted(members, key=lambda t: t.number)
        entered = {
            t.number: 1 if t.status is TrialStatus.STOPPED else len(rungs) + 1 for t in ordered
        }
        sign = -1.0 if self.maximize else 1.0  # ranked best first
        for rung, rung_step in enumerate(rungs[:-1]):
            ranked: list[float] = []  # the rung's values of the trials so far, best first
            for member in ordered:
                value = _rung_value(member, rung_step)
                if entered[member.number] <= rung or value is None or math.isnan(value):
                    continue
                index = max((len(ranked) + 1) // self.eta - 1, 0)  # as _promotable's
                if bisect.bisect_left(ranked, sign * value) <= index:
                    entered[member.number] = max(entered[member.number], rung + 2)
                bisect.insort(ranked, sign * value)
        return entered

    def _promotable(self, value: float, competing: list[float]) -> bool:
        index = max(len(competing) // self.eta - 1, 0)
        ranked = sorted(competing, reverse=self.maximize)
        return not self.worse(value, ranked[index])


def _rung_value_step(curve: Mapping[int, float], rung_step: int) -> int | None:
    """The first recorded step at or past ``rung_step``: where the rung's value is read."""
    past = [s for s in curve if s >= rung_step]
    return min(past) if past else None


def _rung_value(trial: TrialRecord, rung_step: int) -> float | None:
    step = _rung_value_step(trial.intermediate_values, rung_step)
    return None if step is None else trial.intermediate_values[step]
