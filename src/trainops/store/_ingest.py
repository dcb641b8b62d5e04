"""Storing agent events exactly once, and reading logs, metrics and artifacts back.

Events of one host and attempt are numbered 1, 2, 3, ...; the host row keeps the highest number
stored (``acked_seq``). An event at or below it is a resend and is skipped; an event beyond the
next number leaves a gap, so the batch stops there and the agent resends from ``acked_seq + 1``.
The unique keys on ``logs`` and ``metrics`` back this up at the table level.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from trainops.store._records import EventLike, HostState, IngestResult, LogLine, MetricPoint

__all__ = ["MAX_LINE_CHARS", "ingest_events", "read_final_metrics", "read_logs", "read_metrics"]

MAX_LINE_CHARS = 32_768

_log = logging.getLogger("trainops.store")

_Key = tuple[str, str, int]


def ingest_events(
    conn: sqlite3.Connection, key: _Key, events: Sequence[EventLike]
) -> IngestResult | None:
    """Store the new events of host ``key`` = (job, host, attempt); ``None`` if no such host."""
    row = conn.execute(
        "SELECT acked_seq FROM hosts WHERE job = ? AND host = ? AND attempt = ?", key
    ).fetchone()
    if row is None:
        return None
    acked = int(row[0])
    accepted: list[EventLike] = []
    for event in sorted(events, key=lambda e: e.seq):
        if event.seq <= acked:
            continue
        if event.seq != acked + 1:
            break
        _store_one(conn, key, event)
        acked = event.seq
        accepted.append(event)
    if accepted:
        conn.execute(
            "UPDATE hosts SET acked_seq = ? WHERE job = ? AND host = ? AND attempt = ?",
            (acked, *key),
        )
    return IngestResult(acked_seq=acked, accepted=accepted)


def _store_one(conn: sqlite3.Connection, key: _Key, event: EventLike) -> None:
    handler = _HANDLERS.get(str(event.kind))
    if handler is None:
        return  # a kind this control plane does not know: acknowledged, not stored
    try:
        handler(conn, key, event)
    except (KeyError, TypeError, ValueError) as exc:
        # A malformed event is dropped rather than refused: refusing would make the agent resend
        # it forever and hold back every event after it.
        _log.warning("dropped malformed %s event %d of %s: %s", event.kind, event.seq, key, exc)


def _log_event(conn: sqlite3.Connection, key: _Key, event: EventLike) -> None:
    line = str(event.data["line"])[:MAX_LINE_CHARS]
    conn.execute(
        "INSERT OR IGNORE INTO logs (job, host, attempt, seq, ts, stream, line)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*key, event.seq, event.ts, str(event.data.get("stream", "stdout")), line),
    )


def _metric_event(conn: sqlite3.Connection, key: _Key, event: EventLike) -> None:
    value = float(event.data["value"])
    if not math.isfinite(value):
        raise ValueError(f"metric value {value} is not a finite number")
    ts = float(event.data.get("timestamp") or event.ts)
    conn.execute(
        "INSERT OR IGNORE INTO metrics (job, host, attempt, seq, name, ts, value)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*key, event.seq, str(event.data["name"]), ts, value),
    )


def _artifact_event(conn: sqlite3.Connection, key: _Key, event: EventLike) -> None:
    job, host, _attempt = key
    conn.execute(
        "INSERT OR IGNORE INTO artifacts (job, name, host, uri) VALUES (?, ?, ?, ?)",
        (job, str(event.data["name"]), host, str(event.data["uri"])),
    )


def _phase_event(conn: sqlite3.Connection, key: _Key, event: EventLike) -> None:
    conn.execute(
        "UPDATE hosts SET phase = ? WHERE job = ? AND host = ? AND attempt = ?",
        (str(event.data["phase"]), *key),
    )


def _exit_event(conn: sqlite3.Connection, key: _Key, event: EventLike) -> None:
    code = event.data.get("exit_code")
    reason = event.data.get("failure_reason")
    conn.execute(
        "UPDATE hosts SET state = ?, outcome = ?, exit_code = ?, failure_reason = ?, exit_time = ?"
        " WHERE job = ? AND host = ? AND attempt = ? AND state != ?",
        (
            HostState.EXITED,
            str(event.data["outcome"]),
            None if code is None else int(code),
            None if reason is None else str(reason),
            event.ts,
            *key,
            HostState.EXITED,
        ),
    )


_HANDLERS: dict[str, Callable[[sqlite3.Connection, _Key, EventLike], None]] = {
    "log": _log_event,
    "metric": _metric_event,
    "artifact": _artifact_event,
    "phase": _phase_event,
    "exit": _exit_event,
}


def read_logs(
    conn: sqlite3.Connection, job: str, after: int, host: str | None, limit: int
) -> list[LogLine]:
    sql = "SELECT cursor, host, attempt, ts, stream, line FROM logs WHERE job = ? AND cursor > ?"
    args: list[Any] = [job, after]
    if host is not None:
        sql += " AND host = ?"
        args.append(host)
    rows = conn.execute(sql + " ORDER BY cursor LIMIT ?", (*args, limit)).fetchall()
    return [LogLine(*row) for row in rows]


def read_metrics(conn: sqlite3.Connection, job: str, name: str | None) -> list[MetricPoint]:
    sql = "SELECT name, value, ts, host FROM metrics WHERE job = ?"
    args: list[Any] = [job]
    if name is not None:
        sql += " AND name = ?"
        args.append(name)
    rows = conn.execute(sql + " ORDER BY ts, id", args).fetchall()
    return [MetricPoint(*row) for row in rows]


def read_final_metrics(conn: sqlite3.Connection, job: str) -> list[MetricPoint]:
    """The last point of each metric name (by time, then by arrival), sorted by name."""
    rows = conn.execute(
        "SELECT m.name, m.value, m.ts, m.host FROM metrics m WHERE m.job = ? AND m.id = ("
        " SELECT id FROM metrics WHERE job = m.job AND name = m.name"
        " ORDER BY ts DESC, id DESC LIMIT 1) ORDER BY m.name",
        (job,),
    ).fetchall()
    return [MetricPoint(*row) for row in rows]
