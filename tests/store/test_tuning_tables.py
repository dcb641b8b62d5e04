"""The tuning tables (schema version 12): a saved version-11 database upgrades with its jobs
kept, and the rows a tuner writes read back as written; a taken trial number is refused."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from trainops.store import (
    MetadataStore,
    TrialExistsError,
    TuningJobExistsError,
    TuningTrialRecord,
    load_migrations,
)

V11_FIXTURE = Path(__file__).parent / "assets" / "trainops-v11.db"


def _trial(number: int, job: str = "tj", **fields: object) -> TuningTrialRecord:
    defaults: dict[str, object] = {
        "tuning_job": job,
        "number": number,
        "training_job": f"{job}-{number:03d}-abcdef12",
        "hyperparameters": {"lr": "0.01"},
        "status": "Pending",
        "creation_time": 10.0 + number,
    }
    return TuningTrialRecord(**(defaults | fields))  # type: ignore[arg-type]


def test_a_saved_version_11_database_upgrades_and_keeps_its_running_job(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(V11_FIXTURE, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == 11
    store = MetadataStore(path)
    try:
        assert store.schema_version == len(load_migrations()) >= 12
        job = store.get_job("running-job")
        assert job is not None
        assert (job.status, job.secondary_status) == ("InProgress", "Training")
        assert job.spec.hyperparameters == {"lr": 0.1}
        assert store.list_tuning_jobs() == []
        store.create_tuning_job("tj", {"name": "tj"}, "file:///code.tar.gz", now=200.0)
        store.add_trial(_trial(1, training_job="running-job"))
        assert store.trial_of_job("running-job") is not None
    finally:
        store.close()


def test_tuning_rows_read_back_as_written(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "t.db")
    try:
        made = store.create_tuning_job("tj", {"name": "tj", "x": [1]}, "file:///c.tar.gz", 5.0)
        assert (made.status, made.config, made.stop_requested) == (
            "InProgress",
            {"name": "tj", "x": [1]},
            False,
        )
        store.add_trial(_trial(1))
        store.add_trial(_trial(2, hyperparameters={"lr": 0.02, "opt": "sgd", "n": 3}))
        store.update_trial("tj", 1, status="Completed", objective=0.5, intermediate=[0.9, 0.5])
        first, second = store.trials("tj")
        assert (first.status, first.objective, first.intermediate) == ("Completed", 0.5, [0.9, 0.5])
        assert second.hyperparameters == {"lr": 0.02, "opt": "sgd", "n": 3}
        assert store.trial_of_job(second.training_job) == second
        # A retry keeps the trial, starts a new try under a new job and remembers the old one.
        assert not store.retry_trial("tj", 2, "tj-002-retry")  # not a retryable failure
        store.update_trial(
            "tj", 2, status="Failed", failure_reason="InternalServerError: lost", retryable=True
        )
        assert store.retry_trial("tj", 2, "tj-002-retry")
        assert not store.retry_trial("tj", 2, "tj-002-again")  # done already
        retried = store.trials("tj")[1]
        assert (retried.status, retried.tries, retried.training_job) == (
            "Pending",
            2,
            "tj-002-retry",
        )
        assert retried.earlier_jobs == [
            {"name": second.training_job, "failure_reason": "InternalServerError: lost"}
        ]
        assert (retried.failure_reason, retried.retryable, retried.objective) == (None, False, None)
        assert store.request_tuning_stop("tj", 9.0)
        stopped = store.get_tuning_job("tj")
        assert stopped is not None
        assert (stopped.status, stopped.stop_requested, stopped.last_modified_time) == (
            "Stopping", True, 9.0,
        )  # fmt: skip
        assert [t.name for t in store.list_tuning_jobs(statuses=["Stopping"])] == ["tj"]
        assert store.list_tuning_jobs(statuses=["Completed"]) == []
        store.update_tuning_job("tj", 10.0, status="Completed")
        assert not store.request_tuning_stop("tj", 11.0)  # an ended one stays ended
        ended = store.get_tuning_job("tj")
        assert ended is not None and (ended.status, ended.last_modified_time) == ("Completed", 10.0)
    finally:
        store.close()


def test_a_taken_name_number_or_training_job_is_refused(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "t.db")
    try:
        store.create_tuning_job("tj", {}, "file:///c.tar.gz", 5.0)
        with pytest.raises(TuningJobExistsError, match="'tj' already exists"):
            store.create_tuning_job("tj", {}, "file:///c.tar.gz", 6.0)
        store.add_trial(_trial(1))
        with pytest.raises(TrialExistsError, match="trial 1 of 'tj'"):
            store.add_trial(_trial(1, training_job="other"))
        with pytest.raises(TrialExistsError):
            store.add_trial(_trial(2, training_job=_trial(1).training_job))
        with pytest.raises(ValueError, match="no updatable field"):
            store.update_trial("tj", 1, training_job="x")
        assert len(store.trials("tj")) == 1
    finally:
        store.close()
