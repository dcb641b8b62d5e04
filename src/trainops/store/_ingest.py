"""Storing agent events exactly once, and reading logs, metrics and artifacts back.

Events of one host and attempt are numbered 1, 2, 3, ...; the host row keeps the highest number
stored (``acked_seq``). An event at or below it is a resend and is skipped; an event beyond the
next number leaves a gap, so the batch stops there and the agent resends from ``acked_seq + 1``.
The check and the rows it lets through are one transaction, so each event is stored once
(the tables of lines and values have had no unique key of their own since schema version 2:
it made every insert a third slower).

An event may carry many lines (``{"stream", "lines": [...]}``) or values of one metric
(``{"name", "timestamp", "values": [...]}``); it then spans one sequence number per line or
value. Lines are stored in chunks (``log_chunks``: up to :data:`CHUNK_LINES` lines of one event
joined by newlines, each line with a cursor of its own) and values in one chunk per event
(``metric_chunks``: packed float64, the last value also in a column of its own for the final
metrics), each batch with one ``executemany`` per table: a chatty script's 200,000 lines and
400,000 points are a few hundred rows, not 600,000. A stored line has at most
:data:`MAX_LINE_CHARS` (1 MiB) characters; a longer one (the agent cuts them already) is cut and
marked ``… [trainops: line cut at N of M characters]``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sqlite3
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from trainops.protocol._checkpoint import checkpoint_from_event
from trainops.store._checkpoints import insert_checkpoint
from trainops.store._records import (
    EventLike,
    HostState,
    IngestResult,
    LogChunk,
    LogLine,
    MetricPoint,
)

__all__ = [
    "MAX_LINE_CHARS",
    "ingest_events",
    "read_final_metrics",
    "read_log_chunks",
    "read_logs",
    "read_metrics",
]

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


_SURROGATE = re.compile("[\ud800-\udfff]")
# A chunk holds at most this many lines (values), and its lines at most CHUNK_CHARS characters
# (a longer line is a chunk of its own): reading a page from a cursor looks back at most
# CHUNK_LINES cursors, and never loads more than about a mebibyte it does not need.
CHUNK_LINES = 2048
CHUNK_CHARS = 1024 * 1024

_LOG_CHUNK = (
    "INSERT INTO log_chunks (first, job, host, attempt, seq, ts, stream, rank, count, lines)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_METRIC_CHUNK = (
    "INSERT INTO metric_chunks (job, host, attempt, seq, name, ts, count, value, vals)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class _Rows:
    """The chunks of one batch's log lines and metric values, written with one ``executemany``
    each when the batch is done.

    Lines of one event go into chunks of up to :data:`CHUNK_LINES` lines joined by ``"\\n"``
    (a line that itself holds a ``"\\n"``, which an agent never sends, is a chunk of its own,
    stored as it is); values of one event go into one chunk as packed float64. Cursors come from
    ``log_cursor``, read once per batch and written back with it.
    """

    __slots__ = ("conn", "cursor", "key", "logs", "metrics")

    def __init__(self, conn: sqlite3.Connection, key: _Key) -> None:
        self.conn, self.key = conn, key
        self.logs: list[tuple[Any, ...]] = []
        self.metrics: list[tuple[Any, ...]] = []
        self.cursor: int | None = None

    def log_event(self, event: EventLike) -> None:
        stream, lines = _log_parts(event)
        rank = _rank_of(event.data)
        if self.cursor is None:
            self.cursor = int(self.conn.execute("SELECT last FROM log_cursor").fetchone()[0])
        job, host, attempt = self.key
        for offset, count, text in _chunks(_clean(lines)):
            first, seq = self.cursor + 1, event.seq + offset
            self.logs.append((first, job, host, attempt, seq, event.ts, stream, rank, count, text))
            self.cursor += count

    def metric_event(self, event: EventLike) -> None:
        name, ts, values = _metric_parts(event)
        kept = _finite(values, event.seq, self.key)
        if not kept:
            return
        packed = None if len(kept) == 1 else _pack(kept)
        self.metrics.append((*self.key, event.seq, name, ts, len(kept), kept[-1], packed))

    def flush(self) -> None:
        if self.logs:
            self.conn.executemany(_LOG_CHUNK, self.logs)
            self.conn.execute("UPDATE log_cursor SET last = ?", (self.cursor,))
            self.logs = []
        if self.metrics:
            self.conn.executemany(_METRIC_CHUNK, self.metrics)
            self.metrics = []


def _chunks(lines: list[str]) -> Iterator[tuple[int, int, str]]:
    """(offset of its first line, line count, stored text) of each chunk of ``lines``."""
    start, size = 0, 0
    for index, line in enumerate(lines):
        alone = "\n" in line or len(line) > CHUNK_CHARS
        if start < index and (
            alone or size + len(line) > CHUNK_CHARS or index - start == CHUNK_LINES
        ):
            yield start, index - start, "\n".join(lines[start:index])
            start, size = index, 0
        if alone:
            yield index, 1, line
            start, size = index + 1, 0
            continue
        size += len(line) + 1
    if start < len(lines):
        yield start, len(lines) - start, "\n".join(lines[start:])


def _pack(values: list[float]) -> bytes:
    packed = array("d", values)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def _unpack(blob: bytes) -> list[float]:
    values = array("d")
    values.frombytes(blob)
    if sys.byteorder != "little":
        values.byteswap()
    return values.tolist()


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


def _rank_of(data: dict[str, Any]) -> int | None:
    """The rank that wrote an event's lines (a host of several ranks), else None."""
    rank = data.get("rank")
    return rank if type(rank) is int and rank >= 0 else None


def _clean(lines: list[Any]) -> list[str]:
    """``lines`` as storable text: strings, cut past :data:`MAX_LINE_CHARS`, valid UTF-8."""
    plain = set(map(type, lines)) == {str} and max(map(len, lines)) <= MAX_LINE_CHARS
    if plain and _utf8("\n".join(lines)):  # one check for the whole event, in C
        return lines
    return [cut_line(_text(line)) for line in lines]


def _utf8(text: str) -> bool:
    """Whether ``text`` can be stored as it is (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def _finite(values: list[Any], seq: int, key: _Key) -> list[float]:
    """``values`` as floats, less any that is not a finite number (each dropped with a warning)."""
    if set(map(type, values)) == {float} and math.isfinite(sum(values)):
        return values  # the common case, checked in C (a sum of finite values that overflows
        # is not finite either, and goes the slow way below)
    kept = []
    for i, value in enumerate(values):
        if type(value) is not float:
            try:
                value = float(value)
            except (TypeError, ValueError):
                _log.warning("dropped metric value %d of %s: %r", seq + i, key, value)
                continue
        if math.isfinite(value):
            kept.append(value)
        else:
            _log.warning("dropped metric value %d of %s: %s is not finite", seq + i, key, value)
    return kept


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
        " ranks = ?, token_hash = NULL WHERE job = ? AND host = ? AND attempt = ? AND state != ?",
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


def _checkpoint_event(conn: sqlite3.Connection, key: _Key, event: EventLike) -> None:
    job, host, attempt = key
    insert_checkpoint(conn, checkpoint_from_event(job, attempt, host, event.data, event.ts))


_HANDLERS: dict[str, Callable[[sqlite3.Connection, _Key, EventLike], None]] = {
    "artifact": _artifact_event,
    "checkpoint": _checkpoint_event,
    "phase": _phase_event,
    "exit": _exit_event,
}


def read_log_chunks(
    conn: sqlite3.Connection, job: str, after: int, host: str | None, limit: int
) -> list[LogChunk]:
    """The first ``limit`` lines of ``job`` after cursor ``after`` (of ``host``), as chunks."""
    sql = (
        "SELECT first, host, attempt, ts, stream, rank, count, lines FROM log_chunks"
        " WHERE job = ? AND first > ?"
    )
    args: list[Any] = [job]
    if host is not None:
        sql += " AND host = ?"
        args.append(host)
    sql += " ORDER BY first LIMIT ?"
    found: list[LogChunk] = []
    start, wanted = after - CHUNK_LINES, limit  # a chunk holding cursor after + 1 starts here
    while wanted > 0:
        rows = conn.execute(sql, (args[0], start, *args[1:], _READ_CHUNKS)).fetchall()
        for first, where, attempt, ts, stream, rank, count, text in rows:
            skip = max(0, after + 1 - first)
            if skip >= count:
                continue
            lines = [text] if count == 1 else text.split("\n")
            lines = lines[skip : skip + wanted]
            found.append(LogChunk(first + skip, where, attempt, ts, stream, rank, lines))
            wanted -= len(lines)
            if wanted <= 0:
                break
        if len(rows) < _READ_CHUNKS:
            break
        start = rows[-1][0]
    return found


_READ_CHUNKS = 64


def read_logs(
    conn: sqlite3.Connection, job: str, after: int, host: str | None, limit: int
) -> list[LogLine]:
    return [
        LogLine(c.first + i, c.host, c.attempt, c.ts, c.stream, line, c.rank)
        for c in read_log_chunks(conn, job, after, host, limit)
        for i, line in enumerate(c.lines)
    ]


def read_metrics(
    conn: sqlite3.Connection, job: str, name: str | None, attempt: int | None = None
) -> list[MetricPoint]:
    sql = "SELECT name, ts, host, count, value, vals FROM metric_chunks WHERE job = ?"
    args: list[Any] = [job]
    if name is not None:
        sql += " AND name = ?"
        args.append(name)
    if attempt is not None:
        sql += " AND attempt = ?"
        args.append(attempt)
    points = []
    for metric, ts, where, count, value, packed in conn.execute(sql + " ORDER BY ts, id", args):
        values = [value] if count == 1 or packed is None else _unpack(packed)
        points += [MetricPoint(metric, v, ts, where) for v in values]
    return points


#: The last point of each metric of each job named in a JSON array: a recursive walk over the
#: names of each job (one index probe per step, as read_final_metrics), then the last point of
#: each (job, name), all in one statement.
_FINAL_OF_JOBS = """
WITH RECURSIVE names(job, name) AS (
    SELECT j.value, (SELECT MIN(c.name) FROM metric_chunks AS c WHERE c.job = j.value)
    FROM json_each(?) AS j
    UNION ALL
    SELECT names.job, (SELECT MIN(c.name) FROM metric_chunks AS c
                       WHERE c.job = names.job AND c.name > names.name)
    FROM names WHERE names.name IS NOT NULL
)
SELECT names.job, m.name, m.value, m.ts, m.host FROM names JOIN metric_chunks AS m
ON m.id = (SELECT c.id FROM metric_chunks AS c WHERE c.job = names.job AND c.name = names.name
           ORDER BY c.ts DESC, c.id DESC LIMIT 1)
ORDER BY names.job, m.name
"""


def read_final_metrics_of(
    conn: sqlite3.Connection, jobs: Sequence[str]
) -> dict[str, list[MetricPoint]]:
    """:func:`read_final_metrics` of each of ``jobs`` in one query (a job without metrics maps
    to an empty list)."""
    found: dict[str, list[MetricPoint]] = {job: [] for job in jobs}
    for job, *point in conn.execute(_FINAL_OF_JOBS, (json.dumps(list(found)),)):
        found[job].append(MetricPoint(*point))
    return found


def read_final_metrics(conn: sqlite3.Connection, job: str) -> list[MetricPoint]:
    """The last point of each metric name (by time, then by arrival), sorted by name.

    One index probe per name (``metric_chunks_by_job`` is ordered by job, name, ts and then the
    row id; a chunk keeps its last value in ``value``), so a job with millions of points answers
    as fast as one with ten.
    """
    points: list[MetricPoint] = []
    name = conn.execute("SELECT MIN(name) FROM metric_chunks WHERE job = ?", (job,)).fetchone()[0]
    while name is not None:
        row = conn.execute(
            "SELECT name, value, ts, host FROM metric_chunks WHERE job = ? AND name = ?"
            " ORDER BY ts DESC, id DESC LIMIT 1",
            (job, name),
        ).fetchone()
        points.append(MetricPoint(*row))
        name = conn.execute(
            "SELECT MIN(name) FROM metric_chunks WHERE job = ? AND name > ?", (job, name)
        ).fetchone()[0]
    return points
