"""The metadata store: one SQLite database (WAL) that the control plane owns.

One connection is shared by every thread and guarded by a lock, so a write is never interleaved
with another statement; WAL and a busy timeout let a second process (a restarted server) open
the same file safely. Times are floats (seconds since the epoch).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainops.protocol import CheckpointRecord, SubmittedJob
from trainops.store._api_requests import ApiRequestTables
from trainops.store._checkpoints import insert_checkpoint, read_checkpoints
from trainops.store._commits import COMMIT_TOPICS, CommitSignal
from trainops.store._ingest import (
    ingest_events,
    read_final_metrics,
    read_final_metrics_of,
    read_log_chunks,
    read_logs,
    read_metrics,
)
from trainops.store._log_streams import (
    LogPosition,
    LogStreamStats,
    StreamLine,
    read_stream_lines,
    read_streams,
)
from trainops.store._records import (
    AgentCredential,
    ArtifactRecord,
    EventLike,
    HostRecord,
    HostState,
    IngestResult,
    JobExistsError,
    JobRecord,
    LogChunk,
    LogLine,
    MetricPoint,
    NewHost,
    RuleEvaluation,
    Transition,
)
from trainops.store._schema import Migration, apply_migrations, load_migrations
from trainops.store._series import SeriesBucket, read_log_tail_cursor, read_metric_series
from trainops.store._studies import StudyTables
from trainops.store._tags import TagTables
from trainops.store._tuning import TuningTables

__all__ = ["JOB_ORDERS", "MetadataStore"]

#: The orders :meth:`MetadataStore.list_jobs` can list jobs in, each its indexed column.
JOB_ORDERS = {"created": "creation_time", "name": "name", "status": "status"}

#: Up to this many statuses, a listing merges a page of each (more: one scan, then a sort).
_MERGED_STATUSES = 16
_JOB_FIELDS = frozenset(JobRecord.__slots__) - {"name", "spec", "order", "creation_time"}
_HOST_FIELDS = frozenset(HostRecord.__slots__) - {"job", "host", "attempt"}
_JSON_FIELDS = frozenset({"resources", "reservation", "processes", "handle"})
#: How a write begins, ends and is undone: on its own, and inside :meth:`MetadataStore.transaction`.
_TRANSACTION: tuple[str, str, tuple[str, ...]] = ("BEGIN IMMEDIATE", "COMMIT", ("ROLLBACK",))
_SAVEPOINT: tuple[str, str, tuple[str, ...]] = (
    "SAVEPOINT write",
    "RELEASE write",
    ("ROLLBACK TO write", "RELEASE write"),
)


class MetadataStore(TuningTables, TagTables, StudyTables, ApiRequestTables):
    """Jobs, their transitions, hosts, logs, metrics and artifacts in ``path``."""

    def __init__(
        self, path: Path, *, busy_timeout_s: float = 10.0, migrations: list[Migration] | None = None
    ) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Job environments may hold credentials: the database is readable by its owner only
        # (SQLite gives its -wal and -shm files the same mode).
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
        self._lock = threading.RLock()
        self._nested = 0  # depth of transaction() blocks open (read and written under _lock)
        self._pending: set[str] = set()  # topics written inside an open transaction() block
        self.commits = CommitSignal()  # who hears of each commit (the server's change feed)
        self._conn = sqlite3.connect(
            path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            chosen = load_migrations() if migrations is None else migrations
            self.schema_version = apply_migrations(self._conn, chosen, where=str(path))
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Make every write of the block (by this thread) one transaction: all of it is kept, or
        none of it if the block raises. Other threads' statements wait until it ends, so the
        block must not wait on another thread that uses the store."""
        with self._write():
            self._nested += 1
            try:
                yield
            finally:
                self._nested -= 1

    @contextmanager
    def _write(self, topic: str = "jobs") -> Iterator[sqlite3.Connection]:
        """One write transaction; inside :meth:`transaction`, a savepoint of it (a write that
        fails undoes its own statements, and the error undoes the whole transaction unless the
        block catches it). Once the outermost transaction commits, ``commits`` hears of it under
        every ``topic`` written in it (each one of ``COMMIT_TOPICS``)."""
        if topic not in COMMIT_TOPICS:
            raise ValueError(f"not a commit topic: {topic!r}")
        with self._lock:
            if self._nested:
                begin, commit, undo = _SAVEPOINT
            else:
                begin, commit, undo = _TRANSACTION
            self._conn.execute(begin)
            try:
                yield self._conn
            except BaseException:
                for statement in undo:
                    self._conn.execute(statement)
                if not self._nested:
                    self._pending = set()  # the whole transaction is undone: nothing to tell
                raise
            self._conn.execute(commit)
            if self._nested:
                self._pending.add(topic)
                return
            topics = self._pending | {topic}
            self._pending = set()
        for each in sorted(topics):
            self.commits.committed(each)

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    # --- jobs -------------------------------------------------------------------------------

    def create_job(
        self,
        *,
        name: str,
        spec: SubmittedJob,
        code_uri: str,
        output_prefix: str,
        max_attempts: int,
        status: str,
        secondary_status: str,
        message: str,
        now: float,
    ) -> JobRecord:
        """Insert a job and its first secondary transition; :class:`JobExistsError` if taken."""
        rest = (max_attempts, code_uri, output_prefix)
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO jobs (name, spec, status, secondary_status, creation_time,"
                    " last_modified_time, max_attempts, code_uri, output_prefix)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, json.dumps(spec.to_json()), status, secondary_status, now, now, *rest),
                )
                conn.execute(
                    "INSERT INTO transitions (job, status, start_time, message) VALUES (?, ?, ?, ?)",
                    (name, secondary_status, now, message),
                )
        except sqlite3.IntegrityError:
            raise JobExistsError(f"a job named {name!r} already exists") from None
        return self._job_or_fail(name)

    def get_job(self, name: str) -> JobRecord | None:
        rows = self._read("SELECT * FROM jobs WHERE name = ?", (name,))
        return JobRecord.from_row(rows[0]) if rows else None

    def _job_or_fail(self, name: str) -> JobRecord:
        job = self.get_job(name)
        if job is None:
            raise KeyError(name)
        return job

    def list_jobs(
        self,
        *,
        statuses: Sequence[str] = (),
        name_contains: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        limit: int = 50,
        order: str = "created",
        descending: bool = True,
        after: tuple[str | float, int] | None = None,
    ) -> list[JobRecord]:
        """Jobs matching every given filter, by ``order`` (a key of :data:`JOB_ORDERS`; ties
        by submission), newest first by default. ``after`` is the keyset cursor of the page
        before: the last job's ``(value of the order's column, JobRecord.order)``. Each order
        reads an index (``jobs_by_creation``, the name's unique index, ``jobs_by_status``); with
        ``statuses``, each status reads its own in that order (``jobs_by_status_creation``,
        ``jobs_by_status_name``, ``jobs_by_status``) up to ``limit``, and several are merged."""
        if order not in JOB_ORDERS:
            raise ValueError(f"order {order!r} is not one of {', '.join(JOB_ORDERS)}")
        column = JOB_ORDERS[order]
        where: list[str] = ["1 = 1"]
        args: list[Any] = []
        if name_contains:
            where.append("instr(lower(name), lower(?)) > 0")
            args.append(name_contains)
        if created_after is not None:
            where.append("creation_time > ?")
            args.append(created_after)
        if created_before is not None:
            where.append("creation_time < ?")
            args.append(created_before)
        if after is not None:
            where.append(f"({column}, id) {'<' if descending else '>'} (?, ?)")
            args.extend(after)
        direction = "DESC" if descending else "ASC"
        # Only fixed clauses and column names are joined in; every value is a bound parameter.
        by = f" ORDER BY {column} {direction}, id {direction} LIMIT ?"
        sql = f"SELECT * FROM jobs WHERE {' AND '.join(where)}"  # noqa: S608
        return [JobRecord.from_row(r) for r in self._read_jobs(sql, by, args, statuses, limit)]

    def _read_jobs(
        self, sql: str, by: str, args: list[Any], statuses: Sequence[str], limit: int
    ) -> list[sqlite3.Row]:
        """``sql`` ordered ``by``, in any of ``statuses`` (every job when none). One status reads
        its index in this order (0018) up to ``limit``; a few are a page of each, merged, so the
        sort is of ``limit`` rows per status, never of every job of those statuses."""
        distinct = list(dict.fromkeys(statuses))
        if not distinct:
            return self._read(sql + by, (*args, limit))
        if len(distinct) == 1 or len(distinct) > _MERGED_STATUSES:
            where = f" AND status IN ({', '.join('?' * len(distinct))})"
            return self._read(sql + where + by, (*args, *distinct, limit))
        one = f"SELECT * FROM ({sql} AND status = ?{by})"  # noqa: S608
        merged = " UNION ALL ".join([one] * len(distinct))
        each = [value for status in distinct for value in (*args, status, limit)]
        return self._read(f"SELECT * FROM ({merged}){by}", (*each, limit))  # noqa: S608

    def active_jobs(self, statuses: Sequence[str]) -> list[JobRecord]:
        """Jobs in ``statuses``, or with a host of their current attempt that has not exited."""
        marks = ", ".join("?" * len(statuses))
        sql = (
            f"SELECT * FROM jobs j WHERE status IN ({marks}) OR"  # noqa: S608
            " EXISTS (SELECT 1 FROM hosts h"
            " WHERE h.job = j.name AND h.attempt = j.attempt AND h.state != ?) ORDER BY id"
        )
        return [JobRecord.from_row(r) for r in self._read(sql, (*statuses, HostState.EXITED))]

    def watched_jobs(self, statuses: Sequence[str]) -> list[str]:
        """Names of the jobs in ``statuses`` or with a host of their current attempt that has
        not exited, in submission order. Both halves are index lookups (``jobs_by_status``,
        ``hosts_by_state``): the cost follows those jobs, never the jobs that wait unplaced."""
        marks = ", ".join("?" * len(statuses))
        live = [state for state in HostState if state != HostState.EXITED]
        sql = (
            f"SELECT id, name FROM jobs WHERE status IN ({marks}) UNION"  # noqa: S608
            " SELECT j.id, j.name FROM hosts h JOIN jobs j ON j.name = h.job"
            f" AND j.attempt = h.attempt WHERE h.state IN ({', '.join('?' * len(live))})"
            " ORDER BY 1"
        )
        return [str(row["name"]) for row in self._read(sql, (*statuses, *live))]

    def unplaced_jobs(self, status: str, secondary: Sequence[str]) -> list[JobRecord]:
        """Jobs waiting to be placed: no host records for their current attempt yet."""
        marks = ", ".join("?" * len(secondary))
        sql = (
            f"SELECT * FROM jobs j WHERE status = ? AND secondary_status IN ({marks})"  # noqa: S608
            " AND stop_reason IS NULL AND NOT EXISTS (SELECT 1 FROM hosts h"
            " WHERE h.job = j.name AND h.attempt = j.attempt) ORDER BY id"
        )
        return [JobRecord.from_row(r) for r in self._read(sql, (status, *secondary))]

    def update_job(self, name: str, now: float, **fields: Any) -> JobRecord:
        with self._write() as conn:
            _update_job(conn, name, now, fields)
        return self._job_or_fail(name)

    def update_spec(self, name: str, spec: SubmittedJob, now: float) -> JobRecord:
        """Replace the job's stored spec (rules added while it runs); KeyError if missing."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE jobs SET spec = ?, last_modified_time = ? WHERE name = ?",
                (json.dumps(spec.to_json()), now, name),
            )
            if cursor.rowcount != 1:
                raise KeyError(name)
        return self._job_or_fail(name)

    def set_secondary(
        self,
        name: str,
        secondary: str,
        message: str,
        now: float,
        /,
        *,
        final: bool = False,
        **fields: Any,
    ) -> JobRecord:
        """Close the open transition at ``now`` and open ``secondary``; ``final`` closes it too."""
        with self._write() as conn:
            conn.execute(
                "UPDATE transitions SET end_time = ? WHERE job = ? AND end_time IS NULL",
                (now, name),
            )
            conn.execute(
                "INSERT INTO transitions (job, status, start_time, end_time, message)"
                " VALUES (?, ?, ?, ?, ?)",
                (name, secondary, now, now if final else None, message),
            )
            _update_job(conn, name, now, {**fields, "secondary_status": secondary})
        return self._job_or_fail(name)

    def transitions(self, name: str) -> list[Transition]:
        rows = self._read(
            "SELECT status, start_time, end_time, message FROM transitions WHERE job = ?"
            " ORDER BY id",
            (name,),
        )
        return [Transition(*row) for row in rows]

    # --- hosts ------------------------------------------------------------------------------

    def create_hosts(self, job: str, attempt: int, hosts: Sequence[NewHost]) -> None:
        with self._write("hosts") as conn:
            conn.executemany(
                "INSERT INTO hosts (job, attempt, state, host, root, state_dir, resources,"
                " reservation, token_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(job, attempt, HostState.LAUNCHING, *_values(h)) for h in hosts],
            )

    def update_host(self, job: str, host: str, attempt: int, **fields: Any) -> None:
        unknown = set(fields) - _HOST_FIELDS
        if unknown:
            raise ValueError(f"not host fields: {sorted(unknown)}")
        if fields.get("state") == HostState.EXITED:
            fields["token_hash"] = None  # a host that has ended has no credential left
        values = [json.dumps(v) if k in _JSON_FIELDS else v for k, v in fields.items()]
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self._write("hosts") as conn:
            conn.execute(
                f"UPDATE hosts SET {assignments} WHERE job = ? AND host = ? AND attempt = ?",  # noqa: S608
                (*values, job, host, attempt),
            )

    def agent_credential(
        self, job: str, host: str, attempt: int | None = None
    ) -> AgentCredential | None:
        """What an agent request for ``host`` of ``job`` is checked against: the host of
        ``attempt`` (the job's current one when ``None``); ``None`` if there is no such host."""
        rows = self._read(
            "SELECT hosts.token_hash, hosts.state, hosts.attempt, jobs.status,"
            " jobs.attempt AS job_attempt FROM hosts JOIN jobs ON jobs.name = hosts.job"
            " WHERE hosts.job = ? AND hosts.host = ? AND hosts.attempt = coalesce(?, jobs.attempt)",
            (job, host, attempt),
        )
        return AgentCredential(**dict(zip(rows[0].keys(), rows[0], strict=True))) if rows else None

    def revoke_agent_tokens(self, job: str) -> None:
        """Forget the token hashes of every host of ``job`` (it has ended)."""
        with self._write() as conn:
            conn.execute("UPDATE hosts SET token_hash = NULL WHERE job = ?", (job,))

    def hosts(self, job: str, attempt: int) -> list[HostRecord]:
        """The hosts of one attempt in host order (algo-1, algo-2, ..., algo-10)."""
        rows = self._read(
            "SELECT * FROM hosts WHERE job = ? AND attempt = ? ORDER BY length(host), host",
            (job, attempt),
        )
        return [HostRecord.from_row(r) for r in rows]

    def hosts_of(self, jobs: Sequence[tuple[str, int]]) -> dict[str, list[HostRecord]]:
        """:meth:`hosts` of each (job, attempt) of ``jobs`` in one query, by job."""
        found: dict[str, list[HostRecord]] = {job: [] for job, _attempt in jobs}
        rows = self._read(
            "SELECT hosts.* FROM json_each(?) AS j JOIN hosts"
            " ON hosts.job = json_extract(j.value, '$[0]')"
            " AND hosts.attempt = json_extract(j.value, '$[1]')"
            " ORDER BY hosts.job, length(hosts.host), hosts.host",
            (json.dumps([list(pair) for pair in jobs]),),
        )
        for row in rows:
            found[row["job"]].append(HostRecord.from_row(row))
        return found

    def host(self, job: str, host: str, attempt: int) -> HostRecord | None:
        rows = self._read(
            "SELECT * FROM hosts WHERE job = ? AND host = ? AND attempt = ?", (job, host, attempt)
        )
        return HostRecord.from_row(rows[0]) if rows else None

    # --- events, logs, metrics, artifacts ---------------------------------------------------

    def ingest(
        self, job: str, host: str, attempt: int, events: Sequence[EventLike]
    ) -> IngestResult | None:
        """Store each event of (job, host, attempt) once; ``None`` if that host is unknown."""
        with self._lock:
            # The host row read in the same transaction proves that the job exists (and a job
            # cannot go while the transaction holds the write lock): checking the job's key again
            # for each of the batch's rows cost a tenth of the time of storing them.
            self._conn.execute("PRAGMA foreign_keys = OFF")
            try:
                with self._write("output") as conn:
                    return ingest_events(conn, (job, host, attempt), events)
            finally:
                self._conn.execute("PRAGMA foreign_keys = ON")

    def logs(
        self, job: str, *, after: int = 0, host: str | None = None, limit: int = 1000
    ) -> list[LogLine]:
        with self._lock:
            return read_logs(self._conn, job, after, host, limit)

    def log_chunks(
        self, job: str, *, after: int = 0, host: str | None = None, limit: int = 1000
    ) -> list[LogChunk]:
        """The lines :meth:`logs` returns, as runs that share host, stream, rank and time."""
        with self._lock:
            return read_log_chunks(self._conn, job, after, host, limit)

    def log_streams(self, jobs: Collection[str] | None = None) -> list[LogStreamStats]:
        """The log streams (one per host and attempt with a line) of ``jobs`` (default all)."""
        with self._lock:
            return read_streams(self._conn, jobs)

    def stream_lines(
        self,
        streams: Collection[tuple[str, str, int]],
        position: LogPosition,
        *,
        backward: bool = False,
        window_ms: tuple[int | None, int | None] = (None, None),
        max_lines: int = 1000,
        max_chars: int = 1024 * 1024,
    ) -> list[StreamLine]:
        """A page of the lines of ``streams`` ((job, host, attempt) each) in time order from
        ``position`` (``store/_log_streams.py``)."""
        with self._lock:
            return read_stream_lines(
                self._conn,
                streams,
                position,
                backward=backward,
                window_ms=window_ms,
                max_lines=max_lines,
                max_chars=max_chars,
            )

    def metrics(
        self, job: str, name: str | None = None, attempt: int | None = None
    ) -> list[MetricPoint]:
        """The job's metric points in time order (of one name, of one attempt: default all)."""
        with self._lock:
            return read_metrics(self._conn, job, name, attempt)

    def log_tail_cursor(self, job: str, *, host: str | None = None, lines: int = 1000) -> int:
        """The cursor after which ``job``'s last ``lines`` lines (of ``host``) begin."""
        with self._lock:
            return read_log_tail_cursor(self._conn, job, host, lines)

    def metric_series(self, job: str, name: str, buckets: int) -> list[SeriesBucket]:
        """Metric ``name`` of ``job`` in at most ``buckets`` time buckets, each with its min,
        max and last value (for a chart ``buckets`` pixels wide)."""
        with self._lock:
            return read_metric_series(self._conn, job, name, buckets)

    def final_metrics(self, job: str) -> list[MetricPoint]:
        with self._lock:
            return read_final_metrics(self._conn, job)

    def final_metrics_of(self, jobs: Sequence[str]) -> dict[str, list[MetricPoint]]:
        """:meth:`final_metrics` of each of ``jobs``, read in one query (a page of jobs)."""
        with self._lock:
            return read_final_metrics_of(self._conn, jobs)

    def add_artifact(self, job: str, name: str, uri: str, host: str = "") -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO artifacts (job, name, host, uri) VALUES (?, ?, ?, ?)",
                (job, name, host, uri),
            )

    def delete_artifacts(self, job: str, names: Sequence[str]) -> None:
        with self._write() as conn:
            conn.executemany(
                "DELETE FROM artifacts WHERE job = ? AND name = ?", [(job, n) for n in names]
            )

    def artifacts(self, job: str) -> list[ArtifactRecord]:
        rows = self._read(
            "SELECT name, host, uri FROM artifacts WHERE job = ? ORDER BY rowid", (job,)
        )
        return [ArtifactRecord(*row) for row in rows]

    # --- checkpoints ------------------------------------------------------------------------

    def add_checkpoint(self, record: CheckpointRecord) -> None:
        """Keep one checkpoint record (agents report theirs as ``checkpoint`` events)."""
        with self._write() as conn:
            insert_checkpoint(conn, record)

    def checkpoints(self, job: str) -> list[CheckpointRecord]:
        """The job's checkpoint records, oldest first."""
        with self._lock:
            return read_checkpoints(self._conn, job)

    # --- rule evaluations ------------------------------------------------------------------

    def set_rule_evaluation(self, evaluation: RuleEvaluation) -> None:
        """Insert or replace the row of (job, rule name)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO rule_evaluations (job, name, rule, kind, status, status_details,"
                " last_modified_time, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (job, name) DO UPDATE SET rule = excluded.rule,"
                " kind = excluded.kind, status = excluded.status,"
                " status_details = excluded.status_details,"
                " last_modified_time = excluded.last_modified_time, result = excluded.result",
                (
                    evaluation.job,
                    evaluation.name,
                    evaluation.rule,
                    evaluation.kind,
                    evaluation.status,
                    evaluation.status_details,
                    evaluation.last_modified_time,
                    json.dumps(evaluation.result, default=str, allow_nan=False),
                ),
            )

    def rule_evaluations(self, job: str) -> list[RuleEvaluation]:
        rows = self._read("SELECT * FROM rule_evaluations WHERE job = ? ORDER BY rowid", (job,))
        return [RuleEvaluation.from_row(row) for row in rows]


def _values(host: NewHost) -> tuple[str, str, str, str, str, str | None]:
    """``host``'s name, root, state dir, resources, reservation and token hash, as stored."""
    resources, reservation = json.dumps(host.resources), json.dumps(host.reservation)
    return host.host, host.root, host.state_dir, resources, reservation, host.token_hash


def _update_job(conn: sqlite3.Connection, name: str, now: float, fields: dict[str, Any]) -> None:
    unknown = set(fields) - _JOB_FIELDS
    if unknown:
        raise ValueError(f"not job fields: {sorted(unknown)}")
    fields = {**fields, "last_modified_time": now}
    assignments = ", ".join(f"{k} = ?" for k in fields)
    cursor = conn.execute(
        f"UPDATE jobs SET {assignments} WHERE name = ?",  # noqa: S608 (names from a fixed set)
        (*fields.values(), name),
    )
    if cursor.rowcount != 1:
        raise KeyError(name)
