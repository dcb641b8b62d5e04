"""The tuning tables: tuning jobs and their trials (schema version 12).

A trial's row is written *before* its training job is submitted, with the job's name fixed in
it; :meth:`TuningTables.add_trial` refuses a number that is taken, so two tuners (or one that
resumes) can never make the same trial twice. Only the tuner writes these rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainops._errors import TrainopsError
from trainops.store._records import JobExistsError

__all__ = [
    "TRIAL_ENDED",
    "TrialExistsError",
    "TuningJobExistsError",
    "TuningJobRecord",
    "TuningTables",
    "TuningTrialRecord",
]

#: Trial statuses that are final.
TRIAL_ENDED = frozenset({"Completed", "Failed", "Stopped"})
_TRIAL_FIELDS = frozenset(
    {"status", "objective", "intermediate", "failure_reason", "retryable", "end_time"}
)
_JOB_FIELDS = frozenset(
    {"status", "end_time", "failure_reason", "completion_reason", "stop_requested"}
)


class TuningJobExistsError(JobExistsError):
    """A tuning job of that name exists already."""


class TrialExistsError(TrainopsError):
    """A trial of that number (or its training job's name) is recorded already."""


@dataclass(frozen=True, slots=True)
class TuningJobRecord:
    """One tuning job as stored; ``config`` is its declaration as JSON."""

    name: str
    config: dict[str, Any]
    code_uri: str
    status: str
    creation_time: float
    last_modified_time: float
    end_time: float | None
    failure_reason: str | None
    completion_reason: str | None
    stop_requested: bool

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TuningJobRecord:
        data = {key: row[key] for key in row.keys() if key != "id"}  # noqa: SIM118 - a Row
        data["config"] = json.loads(data["config"])
        data["stop_requested"] = bool(data["stop_requested"])
        return cls(**data)


@dataclass(frozen=True, slots=True)
class TuningTrialRecord:
    """One trial: its training job, the tuned values it got and how it went."""

    tuning_job: str
    number: int
    training_job: str
    hyperparameters: dict[str, Any]
    status: str
    creation_time: float
    objective: float | None = None
    intermediate: list[float] = field(default_factory=list)
    failure_reason: str | None = None
    retryable: bool = False
    tries: int = 1
    earlier_jobs: list[dict[str, Any]] = field(default_factory=list)
    end_time: float | None = None

    @property
    def ended(self) -> bool:
        return self.status in TRIAL_ENDED

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> TuningTrialRecord:
        data = {key: row[key] for key in row.keys()}  # noqa: SIM118 - a Row
        data["hyperparameters"] = json.loads(data["hyperparameters"])
        data["intermediate"] = json.loads(data["intermediate"])
        data["earlier_jobs"] = json.loads(data["earlier_jobs"])
        data["retryable"] = bool(data["retryable"])
        return cls(**data)


class TuningTables:
    """The tuning half of :class:`~trainops.store.MetadataStore` (mixed into it)."""

    if TYPE_CHECKING:  # what it uses of the store it is mixed into (declared, not defined here)

        def _write(self, topic: str = ...) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]: ...

    def create_tuning_job(
        self, name: str, config: dict[str, Any], code_uri: str, now: float
    ) -> TuningJobRecord:
        """Record a new tuning job (InProgress); :class:`TuningJobExistsError` if taken."""
        try:
            with self._write("tuning") as conn:
                conn.execute(
                    "INSERT INTO tuning_jobs (name, config, code_uri, status, creation_time,"
                    " last_modified_time) VALUES (?, ?, ?, 'InProgress', ?, ?)",
                    (name, json.dumps(config), code_uri, now, now),
                )
        except sqlite3.IntegrityError:
            raise TuningJobExistsError(f"a tuning job named {name!r} already exists") from None
        return self._tuning_job_or_fail(name)

    def get_tuning_job(self, name: str) -> TuningJobRecord | None:
        rows = self._read("SELECT * FROM tuning_jobs WHERE name = ?", (name,))
        return TuningJobRecord.from_row(rows[0]) if rows else None

    def _tuning_job_or_fail(self, name: str) -> TuningJobRecord:
        job = self.get_tuning_job(name)
        if job is None:
            raise KeyError(name)
        return job

    def list_tuning_jobs(
        self, *, statuses: Sequence[str] = (), limit: int = 50
    ) -> list[TuningJobRecord]:
        """Tuning jobs in ``statuses`` (all when empty), newest first."""
        sql, args = "SELECT * FROM tuning_jobs", list(statuses)
        if statuses:
            sql += f" WHERE status IN ({', '.join('?' * len(statuses))})"
        sql += " ORDER BY creation_time DESC, id DESC LIMIT ?"
        return [TuningJobRecord.from_row(r) for r in self._read(sql, (*args, limit))]

    def update_tuning_job(self, name: str, now: float, **changes: Any) -> TuningJobRecord:
        """Set some of status, end_time, failure_reason, completion_reason, stop_requested."""
        self._update("tuning_jobs", _JOB_FIELDS, changes, now, "name = ?", (name,))
        return self._tuning_job_or_fail(name)

    def request_tuning_stop(self, name: str, now: float) -> bool:
        """Mark a running tuning job Stopping; False (nothing changes) once it has ended, so a
        stop racing the tuner's last pass never revives an ended tuning job."""
        with self._write("tuning") as conn:
            changed = conn.execute(
                "UPDATE tuning_jobs SET status = 'Stopping', stop_requested = 1,"
                " last_modified_time = ? WHERE name = ? AND status IN ('InProgress', 'Stopping')",
                (now, name),
            ).rowcount
        return changed > 0

    def add_trial(self, trial: TuningTrialRecord) -> None:
        """Record a trial before its training job is submitted; refuses a taken number."""
        try:
            with self._write("tuning") as conn:
                conn.execute(
                    "INSERT INTO tuning_trials (tuning_job, number, training_job,"
                    " hyperparameters, status, creation_time) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        trial.tuning_job,
                        trial.number,
                        trial.training_job,
                        json.dumps(trial.hyperparameters),
                        trial.status,
                        trial.creation_time,
                    ),
                )
        except sqlite3.IntegrityError:
            raise TrialExistsError(
                f"trial {trial.number} of {trial.tuning_job!r} is recorded already"
            ) from None

    def trials(self, tuning_job: str, after: int | None = None) -> list[TuningTrialRecord]:
        """Every trial of ``tuning_job``, by number (only those numbered above ``after``)."""
        rows = self._read(
            "SELECT * FROM tuning_trials WHERE tuning_job = ? AND number > ? ORDER BY number",
            (tuning_job, -1 if after is None else after),
        )
        return [TuningTrialRecord.from_row(r) for r in rows]

    def trial_of_job(self, training_job: str) -> TuningTrialRecord | None:
        """The trial a training job runs, if it runs one."""
        rows = self._read("SELECT * FROM tuning_trials WHERE training_job = ?", (training_job,))
        return TuningTrialRecord.from_row(rows[0]) if rows else None

    def update_trial(self, tuning_job: str, number: int, **changes: Any) -> None:
        """Set some of status, objective, intermediate, failure_reason, retryable, end_time."""
        if "intermediate" in changes:
            changes["intermediate"] = json.dumps(changes["intermediate"])
        self._update(
            "tuning_trials", _TRIAL_FIELDS, changes, None, "tuning_job = ? AND number = ?",
            (tuning_job, number),
        )  # fmt: skip

    def retry_trial(self, tuning_job: str, number: int, training_job: str) -> bool:
        """Start trial ``number``'s next try as ``training_job`` (Pending, nothing measured),
        keeping the ended try's job and failure in ``earlier_jobs``; False (and nothing changes)
        when the trial is not an ended, retryable try any more (a second tuner pass)."""
        with self._write("tuning") as conn:
            row = conn.execute(
                "SELECT training_job, failure_reason, earlier_jobs FROM tuning_trials"
                " WHERE tuning_job = ? AND number = ? AND retryable = 1",
                (tuning_job, number),
            ).fetchone()
            if row is None:
                return False
            earlier = json.loads(row["earlier_jobs"])
            earlier.append({"name": row["training_job"], "failure_reason": row["failure_reason"]})
            conn.execute(
                "UPDATE tuning_trials SET training_job = ?, status = 'Pending', objective = NULL,"
                " intermediate = '[]', failure_reason = NULL, retryable = 0, end_time = NULL,"
                " tries = tries + 1, earlier_jobs = ? WHERE tuning_job = ? AND number = ?",
                (training_job, json.dumps(earlier), tuning_job, number),
            )
        return True

    def _update(
        self,
        table: str,
        allowed: frozenset[str],
        changes: dict[str, Any],
        now: float | None,
        where: str,
        key: tuple[Any, ...],
    ) -> None:
        unknown = set(changes) - allowed
        if unknown:
            raise ValueError(f"{table} has no updatable field(s) {sorted(unknown)}")
        if now is not None:
            changes = {**changes, "last_modified_time": now}
        if not changes:
            return
        # Column names come from the fixed allowed set above; every value is a bound parameter.
        sets = ", ".join(f"{column} = ?" for column in changes)
        with self._write("tuning") as conn:
            conn.execute(f"UPDATE {table} SET {sets} WHERE {where}", (*changes.values(), *key))  # noqa: S608
