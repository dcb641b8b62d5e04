"""The trials of a tuning job that can no longer change, held by the tuner between passes.

A tuner pass needs every trial of its tuning job (the search is caught up with them), and reading
a trial row costs far more than the row's bytes (its JSON fields, a record): at 500 trials, two
full reads were most of the pass that follows a trial's end, the pass that submits the next
trial. A trial that has ended and will not be tried again (ended, not retryable) never changes
again: only the tuner writes trial rows, and it writes an ended one only to try it again
(``retry_trial``, which refuses a trial that is not retryable). So the tuner holds those, and
reads only the rows above the longest run of settled trials from the first: the running ones,
and any settled after a gap. The store stays the only source of truth: a fresh tuner (after a
crash) starts with nothing held and reads every row once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops.store import MetadataStore, TuningTrialRecord

__all__ = ["SettledTrials", "settled"]


def settled(trial: TuningTrialRecord) -> bool:
    """Whether ``trial``'s row can no longer change: ended, and not to be tried again."""
    return trial.ended and not trial.retryable


@dataclass
class SettledTrials:
    """One tuning job's settled trials: every trial numbered up to :attr:`through` is one."""

    through: int = -1
    held: dict[int, TuningTrialRecord] = field(default_factory=dict)

    def read(self, store: MetadataStore, tuning_job: str) -> list[TuningTrialRecord]:
        """Every trial of ``tuning_job`` by number, as :meth:`MetadataStore.trials` gives
        them, reading only the rows above :attr:`through`."""
        fresh = store.trials(tuning_job, after=self.through)
        self.held.update((t.number, t) for t in fresh if settled(t))
        while self.through + 1 in self.held:
            self.through += 1
        kept = [self.held[number] for number in range(self.through + 1)]
        return kept + [t for t in fresh if t.number > self.through]
