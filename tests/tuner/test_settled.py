"""The tuner's settled trials (``_settled``): what it reads equals a full read of the rows at
every step of trials running, ending, failing retryably and being tried again, while the rows
of settled trials (ended, not retryable) are no longer read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trainops.store import MetadataStore, TuningTrialRecord
from trainops.tuner._settled import SettledTrials, settled


def _store(tmp_path: Path, count: int) -> MetadataStore:
    store = MetadataStore(tmp_path / "metadata.db")
    store.create_tuning_job("t", {}, "file:///code", 1.0)
    for number in range(count):
        trial = TuningTrialRecord("t", number, f"t-{number:03d}", {"x": number}, "Pending", 1.0)
        store.add_trial(trial)
    return store


def _end(store: MetadataStore, number: int, status: str, retryable: bool = False) -> None:
    store.update_trial(
        "t", number, status=status, objective=0.5, intermediate=[0.5], retryable=retryable,
        end_time=2.0,
    )  # fmt: skip


def test_the_store_reads_the_trials_above_a_number(tmp_path: Path) -> None:
    store = _store(tmp_path, 4)
    assert [t.number for t in store.trials("t")] == [0, 1, 2, 3]
    assert [t.number for t in store.trials("t", after=1)] == [2, 3]
    assert store.trials("t", after=3) == []


def test_what_is_read_is_every_row_as_it_is(tmp_path: Path) -> None:
    store = _store(tmp_path, 5)
    held = SettledTrials()
    assert held.read(store, "t") == store.trials("t") and held.through == -1
    _end(store, 0, "Completed")
    _end(store, 1, "Stopped")
    _end(store, 3, "Completed")  # settled after a gap: read again, not skipped
    assert held.read(store, "t") == store.trials("t") and held.through == 1
    _end(store, 2, "Failed", retryable=True)  # to be tried again: not settled
    assert held.read(store, "t") == store.trials("t") and held.through == 1
    assert store.retry_trial("t", 2, "t-002-2")
    assert held.read(store, "t") == store.trials("t") and held.through == 1
    _end(store, 2, "Failed")
    store.add_trial(TuningTrialRecord("t", 5, "t-005", {"x": 5}, "Pending", 1.0))
    assert held.read(store, "t") == store.trials("t") and held.through == 3
    assert [t.number for t in held.read(store, "t")] == [0, 1, 2, 3, 4, 5]


def test_a_settled_row_is_not_read_again(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    held = SettledTrials()
    _end(store, 0, "Completed")
    first = held.read(store, "t")
    assert settled(first[0]) and not settled(first[1])
    # Nothing of trainops writes a settled row; written behind its back, it shows that the
    # held copy is what the tuner uses now (and that the running trial is read afresh).
    with sqlite3.connect(tmp_path / "metadata.db") as conn:
        conn.execute("UPDATE tuning_trials SET objective = 9.0 WHERE tuning_job = 't'")
    again = held.read(store, "t")
    assert again[0].objective == 0.5 and again[1].objective == 9.0
