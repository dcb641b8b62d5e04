"""The studies tables: scaling studies and their rows, one per configuration (schema version 16).

``trainops study`` records its study through the API as it runs: :meth:`StudyTables.put_study`
writes the whole study (its status and every row so far) in one transaction, so a reader sees
either the study before an update or after it, never half of one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

__all__ = ["STUDY_STATUSES", "StudyRecord", "StudyRowRecord", "StudyTables"]

#: The states of a study: running, or how it ended.
STUDY_STATUSES = ("InProgress", "Completed", "Failed", "Stopped")


@dataclass(frozen=True, slots=True)
class StudyRowRecord:
    """One configuration of a study: its job and, once the job has ended, its figures."""

    label: str
    instance_type: str
    instance_count: int
    processes_per_host: int
    job_name: str | None
    status: str
    throughput: float | None = None
    time_to_target_s: float | None = None
    billable_seconds: float | None = None
    cost_usd: float | None = None
    efficiency: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class StudyRecord:
    """A study: its name, what it studies (``title``), its state and its rows in order."""

    name: str
    title: str
    status: str
    target_metric: str | None
    creation_time: float
    last_modified_time: float
    rows: tuple[StudyRowRecord, ...]


_ROW_COLUMNS = tuple(f.name for f in fields(StudyRowRecord))
_INSERT_ROW = (
    "INSERT INTO study_rows (study, position, label, instance_type, instance_count,"
    " processes_per_host, job_name, status, throughput, time_to_target_s, billable_seconds,"
    " cost_usd, efficiency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)  # the columns in _ROW_COLUMNS' order


class StudyTables:
    """The study half of :class:`~trainops.store.MetadataStore` (mixed into it)."""

    if TYPE_CHECKING:  # what it uses of the store it is mixed into (declared, not defined here)

        def _write(self, topic: str = ...) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]: ...

    def put_study(
        self,
        name: str,
        *,
        title: str,
        status: str,
        target_metric: str | None,
        rows: Sequence[StudyRowRecord],
        now: float,
    ) -> StudyRecord:
        """Create or replace study ``name`` with ``rows`` (its creation time is kept)."""
        with self._write("studies") as conn:
            conn.execute(
                "INSERT INTO studies (name, title, status, target_metric, creation_time,"
                " last_modified_time) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                " title = excluded.title, status = excluded.status,"
                " target_metric = excluded.target_metric,"
                " last_modified_time = excluded.last_modified_time",
                (name, title, status, target_metric, now, now),
            )
            conn.execute("DELETE FROM study_rows WHERE study = ?", (name,))
            conn.executemany(
                _INSERT_ROW,
                [(name, i, *(getattr(r, c) for c in _ROW_COLUMNS)) for i, r in enumerate(rows)],
            )
        found = self.get_study(name)
        assert found is not None  # written just now; studies are never deleted
        return found

    def get_study(self, name: str) -> StudyRecord | None:
        """Study ``name`` with its rows, or None."""
        found = self._read("SELECT * FROM studies WHERE name = ?", (name,))
        return self._study(found[0]) if found else None

    def list_studies(self, limit: int = 50) -> list[StudyRecord]:
        """The studies, newest first, with their rows."""
        found = self._read(
            "SELECT * FROM studies ORDER BY creation_time DESC, name LIMIT ?", (limit,)
        )
        return [self._study(row) for row in found]

    def _study(self, row: sqlite3.Row) -> StudyRecord:
        rows = self._read(
            "SELECT label, instance_type, instance_count, processes_per_host, job_name, status,"
            " throughput, time_to_target_s, billable_seconds, cost_usd, efficiency"
            " FROM study_rows WHERE study = ? ORDER BY position",
            (row["name"],),
        )
        return StudyRecord(
            name=str(row["name"]),
            title=str(row["title"]),
            status=str(row["status"]),
            target_metric=row["target_metric"],
            creation_time=float(row["creation_time"]),
            last_modified_time=float(row["last_modified_time"]),
            rows=tuple(StudyRowRecord(**{c: r[c] for c in _ROW_COLUMNS}) for r in rows),
        )
