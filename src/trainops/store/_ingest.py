"""Storing agent events exactly once, and reading logs, metrics and artifacts back.

Events of one host and attempt are numbered 1, 2, 3, ...; the host row keeps the highest number
stored (``acked_seq``). An event at or below it is a resend and is skipped; an event beyond the
next number leaves a gap, so the batch stops there and the agent resends from ``acked_seq + 1``.
The check and the rows it lets through are one transaction, so each event is stored once
(``logs`` and ``metrics`` have no unique key of their own since schema version 2: it made every
insert a third slower).

An event may carry many lines (``{"stream", "lines": [...]}``) or values of one metric
(``{"name", "timestamp", "values": [...]}``); it then spans one sequence number per line or
value, and each row keeps its own. A batch is stored in its caller's transaction, its log lines and metric points
each with one ``executemany``. A stored line has at most :data:`MAX_LINE_CHARS` (1 MiB) characters; a longer
one (the agent cuts them already) is cut and marked ``… [trainops: line cut at N of M
characters]``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from trainops.store._records import EventLike, HostState, IngestResult, LogLine, MetricPoint

__all__ = ["MAX_LINE_CHARS", "ingest_events", "read_final_metrics", "read_logs", "read_metrics"]

MAX_LINE_CHARS = 1024 * 1024
_MARKER_ROOM = 100  # an agent's own cut marker may follow its first MAX_LINE_CHARS characters

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
    rows = _Rows(conn, key)
    for event in sorted(events, key=lambda e: e.seq):
        if event.seq <= acked:
            continue
        if event.seq != acked + 1:
            break
        _store_one(conn, key, event, rows)
        acked = event.seq + _span(str(event.kind), event.data) - 1
        accepted.append(event)
    rows.flush()
    if accepted:
        conn.execute(
            "UPDATE hosts SET acked_seq = ? WHERE job = ? AND host = ? AND attempt = ?",
            (acked, *key),
        )
    return IngestResult(acked_seq=acked, accepted=accepted)


def _span(kind: str, data: dict[str, Any]) -> int:
    """Sequence numbers an event takes (``trainops.protocol.event_span``; the store sits below
    the protocol package, so it keeps its own copy of the rule)."""
    items = data.get("lines") if kind == "log" else data.get("values") if kind == "metric" else None
    return max(1, len(items)) if isinstance(items, list) else 1


_LOG_ROW = (
    "INSERT INTO logs (job, host, attempt, seq, ts, stream, rank, line)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_LOGS_FROM_JSON = (
    "INSERT INTO logs (job, host, attempt, seq, ts, stream, rank, line)"
    " SELECT ?, ?, ?, ? + key, ?, ?, ?, value FROM json_each(?)"
)
_METRIC_ROW = (
    "INSERT INTO metrics (job, host, attempt, seq, name, ts, value) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_METRICS_FROM_JSON = (
    "INSERT INTO metrics (job, host, attempt, seq, name, ts, value)"
    " SELECT ?, ?, ?, ? + key, ?, ?, value FROM json_each(?)"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_BULK = 16  # an event with at least this many lines or values is inserted in one statement


class _Rows:
    """Log lines and metric values of one batch, stored in order.

    An event of many plain lines (values) is inserted with one ``INSERT … SELECT … FROM
    json_each(?)``: SQLite walks the JSON array, with no Python tuple and no statement run per
    row (less than half the time of ``executemany``). Anything else (a single line, a NUL
    character, which SQLite's JSON functions cut at, a value that is not a finite number) goes
    row by row through ``executemany``.
    """

    __slots__ = ("conn", "key", "logs", "metrics")
    json_each = True  # False once SQLite turned out to lack its JSON functions

    def __init__(self, conn: sqlite3.Connection, key: _Key) -> None:
        self.conn, self.key = conn, key
        self.logs: list[tuple[Any, ...]] = []
        self.metrics: list[tuple[Any, ...]] = []

    def log_event(self, event: EventLike) -> None:
        stream, lines = _log_parts(event)
        rank = _rank_of(event.data)
        text = _json_lines(lines) if len(lines) >= _BULK else None
        bulk = (event.seq, event.ts, stream, rank, text)
        if text is None or not self._bulk(_LOGS_FROM_JSON, bulk):
            self.logs += _log_rows(self.key, event.seq, event.ts, stream, rank, lines)

    def metric_event(self, event: EventLike) -> None:
        name, ts, values = _metric_parts(event)
        text = _json_values(values) if len(values) >= _BULK else None
        if text is None or not self._bulk(_METRICS_FROM_JSON, (event.seq, name, ts, text)):
            self.metrics += _metric_rows(self.key, event.seq, name, ts, values)

    def flush(self) -> None:
        if self.logs:
            self.conn.executemany(_LOG_ROW, self.logs)
            self.logs = []
        if self.metrics:
            self.conn.executemany(_METRIC_ROW, self.metrics)
            self.metrics = []

    def _bulk(self, sql: str, args: tuple[Any, ...]) -> bool:
        if not _Rows.json_each:
            return False
        self.flush()  # rows before this event go first
        try:
            self.conn.execute(sql, (*self.key, *args))
        except sqlite3.OperationalError as exc:
            if "json_each" not in str(exc):
                raise
            _Rows.json_each = False
            return False
        return True


def _store_one(conn: sqlite3.Connection, key: _Key, event: EventLike, rows: _Rows) -> None:
    kind = str(event.kind)
    try:
        if kind == "log":
            rows.log_event(event)
        elif kind == "metric":
            rows.metric_event(event)
        elif kind in _HANDLERS:
            _HANDLERS[kind](conn, key, event)
        # else: a kind this control plane does not know: acknowledged, not stored
    except (KeyError, TypeError, ValueError) as exc:
        # A malformed event is dropped rather than refused: refusing would make the agent resend
        # it forever and hold back every event after it.
        _log.warning("dropped malformed %s event %d of %s: %s", event.kind, event.seq, key, exc)


def cut_line(line: str) -> str:
    """``line``, or its first :data:`MAX_LINE_CHARS` characters and a marker saying so."""
    if len(line) <= MAX_LINE_CHARS + _MARKER_ROOM:
        return line
    return f"{line[:MAX_LINE_CHARS]}… [trainops: line cut at {MAX_LINE_CHARS} of {len(line)} characters]"


def _log_parts(event: EventLike) -> tuple[str, list[Any]]:
    data = event.data
    stream = str(data.get("stream", "stdout"))
    lines = data.get("lines")
    if lines is None:
        return stream, [data["line"]]
    if not isinstance(lines, list):
        raise TypeError(f"lines is a {type(lines).__name__}, not a list")
    return stream, lines


def _json_lines(lines: list[Any]) -> str | None:
    """``lines`` as a JSON array SQLite can take whole, else ``None``."""
    if set(map(type, lines)) != {str}:
        return None
    if max(map(len, lines)) > MAX_LINE_CHARS + _MARKER_ROOM:
        lines = [cut_line(line) for line in lines]
    text = json.dumps(lines, ensure_ascii=False)
    if "\\u0000" in text:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: row by row, with replacement characters
        return None
    return text


def _log_rows(
    key: _Key, seq: int, ts: float, stream: str, rank: int | None, lines: list[Any]
) -> list[tuple[Any, ...]]:
    job, host, attempt = key
    return [
        (job, host, attempt, seq + i, ts, stream, rank, cut_line(_text(line)))
        for i, line in enumerate(lines)
    ]


def _rank_of(data: dict[str, Any]) -> int | None:
    """The rank that wrote an event's lines (a host of several ranks), else None."""
    rank = data.get("rank")
    return rank if type(rank) is int and rank >= 0 else None


def _text(line: object) -> str:
    text = line if type(line) is str else str(line)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (from JSON "\\udc80") cannot be stored as such
        return _SURROGATE.sub("\ufffd", text)
    return text


def _metric_parts(event: EventLike) -> tuple[str, float, list[Any]]:
    data = event.data
    name = str(data["name"])
    values = data.get("values")
    if values is None:
        values = [data["value"]]
    elif not isinstance(values, list):
        raise TypeError(f"values is a {type(values).__name__}, not a list")
    ts = float(data.get("timestamp") or event.ts)
    if not math.isfinite(ts):
        raise ValueError(f"metric timestamp {ts} is not a finite number")
    return name, ts, values


def _json_values(values: list[Any]) -> str | None:
    """``values`` as a JSON array SQLite can take whole (finite floats only), else ``None``."""
    if set(map(type, values)) != {float}:
        return None
    if any(map(math.isinf, values)) or any(map(math.isnan, values)):
        return None
    return json.dumps(values)


def _metric_rows(
    key: _Key, seq: int, name: str, ts: float, values: list[Any]
) -> list[tuple[Any, ...]]:
    job, host, attempt = key
    rows = []
    for i, value in enumerate(values):
        if type(value) is not float:
            try:
                value = float(value)
            except (TypeError, ValueError):
                _log.warning("dropped metric value %d of %s: %r", seq + i, key, value)
                continue
        if math.isfinite(value):
            rows.append((job, host, attempt, seq + i, name, ts, value))
        else:
            _log.warning("dropped metric value %d of %s: %s is not finite", seq + i, key, value)
    return rows


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
        "UPDATE hosts SET state = ?, outcome = ?, exit_code = ?, failure_reason = ?, exit_time = ?,"
        " ranks = ? WHERE job = ? AND host = ? AND attempt = ? AND state != ?",
        (
            HostState.EXITED,
            str(event.data["outcome"]),
            None if code is None else int(code),
            None if reason is None else str(reason),
            event.ts,
            json.dumps(_rank_exits(event.data.get("ranks"))),
            *key,
            HostState.EXITED,
        ),
    )


def _rank_exits(raw: Any) -> list[dict[str, int | None]]:
    """The ``ranks`` of an exit event, ``[{"rank": r, "exit_code": c}]``; anything else is []."""
    if not isinstance(raw, list):
        return []
    found = []
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("rank"), int):
            code = item.get("exit_code")
            found.append(
                {"rank": item["rank"], "exit_code": code if isinstance(code, int) else None}
            )
    return found


_HANDLERS: dict[str, Callable[[sqlite3.Connection, _Key, EventLike], None]] = {
    "artifact": _artifact_event,
    "phase": _phase_event,
    "exit": _exit_event,
}


def read_logs(
    conn: sqlite3.Connection, job: str, after: int, host: str | None, limit: int
) -> list[LogLine]:
    sql = (
        "SELECT cursor, host, attempt, ts, stream, line, rank FROM logs"
        " WHERE job = ? AND cursor > ?"
    )
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
    """The last point of each metric name (by time, then by arrival), sorted by name.

    One index probe per name (``metrics_by_job`` is ordered by job, name, ts and then the row
    id), so a job with millions of points answers as fast as one with ten.
    """
    points: list[MetricPoint] = []
    name = conn.execute("SELECT MIN(name) FROM metrics WHERE job = ?", (job,)).fetchone()[0]
    while name is not None:
        row = conn.execute(
            "SELECT name, value, ts, host FROM metrics WHERE job = ? AND name = ?"
            " ORDER BY ts DESC, id DESC LIMIT 1",
            (job, name),
        ).fetchone()
        points.append(MetricPoint(*row))
        name = conn.execute(
            "SELECT MIN(name) FROM metrics WHERE job = ? AND name > ?", (job, name)
        ).fetchone()[0]
    return points
