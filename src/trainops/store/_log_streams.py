"""A job's log read as streams, one per host and attempt, in time order: what the CloudWatch Logs
answer of the AWS layer (``server/aws/_logs.py``) pages through.

Lines are ordered by (timestamp, cursor), the order CloudWatch keeps a stream in, and read from
a :class:`LogPosition` forward or backward, a page at a time: the ordering query reads only the
chunks' keys (cursor, count, time), and the text of a chunk is read only once the page needs it,
so a 200,000-line log is never loaded whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["LogPosition", "LogStreamStats", "StreamLine", "read_stream_lines", "read_streams"]

StreamKey = tuple[str, str, int]  # (job, host, attempt)
_KEYS_AT_ONCE = 10_000  # chunks ordered per query at most (a page of one-line chunks)
_TEXTS_AT_ONCE = 64  # chunks whose text is read per query
_JOBS_IN_SQL = 500  # more selected jobs than this are filtered in Python, not in the query


@dataclass(frozen=True, slots=True)
class LogPosition:
    """A place between two lines of a stream: just after (forward) or just before (backward)
    the line (``ts``, ``cursor``)."""

    ts: float
    cursor: int

    @classmethod
    def head(cls) -> LogPosition:
        return cls(-1.0, 0)

    @classmethod
    def tail(cls) -> LogPosition:
        return cls(float("inf"), 0)


@dataclass(frozen=True, slots=True)
class LogStreamStats:
    """The log of one host in one attempt of a job: when its first line (the first stored) was
    written, its last line's time and cursor, and how many lines it has."""

    job: str
    host: str
    attempt: int
    first_ts: float
    last_ts: float
    last_cursor: int
    lines: int


@dataclass(frozen=True, slots=True)
class StreamLine:
    job: str
    host: str
    attempt: int
    ts: float
    cursor: int
    stream: str
    line: str


def read_streams(conn: sqlite3.Connection, jobs: Collection[str] | None) -> list[LogStreamStats]:
    """The streams of ``jobs`` (of every job where ``None``) that have at least one line."""
    sql = (
        "SELECT job, host, attempt, MIN(first), MAX(ts), MAX(first + count - 1), SUM(count)"
        " FROM log_chunks"
    )
    args: list[Any] = []
    if jobs is not None:
        args = sorted(jobs)
        sql += f" WHERE job IN ({', '.join('?' * len(args))})"
    found = []
    for job, host, attempt, first, last_ts, last, lines in conn.execute(
        sql + " GROUP BY job, host, attempt", args
    ).fetchall():
        (first_ts,) = conn.execute("SELECT ts FROM log_chunks WHERE first = ?", (first,)).fetchone()
        found.append(LogStreamStats(job, host, attempt, first_ts, last_ts, last, lines))
    return found


def read_stream_lines(
    conn: sqlite3.Connection,
    streams: Collection[StreamKey],
    position: LogPosition,
    *,
    backward: bool = False,
    window_ms: tuple[int | None, int | None] = (None, None),
    max_lines: int,
    max_chars: int,
) -> list[StreamLine]:
    """Up to ``max_lines`` lines of ``streams`` (at least one, else up to ``max_chars``
    characters) after ``position`` (before it, ``backward``: then nearest first), whose
    timestamps in milliseconds fall in ``window_ms`` (start inclusive, end exclusive)."""
    found: list[StreamLine] = []
    chars = 0
    batch = max(1, min(max_lines, _KEYS_AT_ONCE))  # a chunk holds a line at least
    for line in _lines(conn, set(streams), position, backward, window_ms, batch):
        chars += len(line.line)
        if found and chars > max_chars:
            break
        found.append(line)
        if len(found) >= max_lines:
            break  # before the generator reads on
    return found


def _lines(
    conn: sqlite3.Connection,
    streams: set[StreamKey],
    position: LogPosition,
    backward: bool,
    window_ms: tuple[int | None, int | None],
    batch: int,
) -> Iterator[StreamLine]:
    ts, cursor = position.ts, position.cursor
    while True:
        keys = _keys(conn, streams, LogPosition(ts, cursor), backward, window_ms, batch)
        for group in range(0, len(keys), _TEXTS_AT_ONCE):
            wanted = [k for k in keys[group : group + _TEXTS_AT_ONCE] if tuple(k[3:]) in streams]
            texts = _texts(conn, [k[0] for k in wanted])
            for first, count, chunk_ts, job, host, attempt in wanted:
                stream, text = texts[first]
                lines = [text] if count == 1 else text.split("\n")
                numbered = list(enumerate(lines, first))
                for number, line in reversed(numbered) if backward else numbered:
                    if _beyond(chunk_ts, number, position, backward):
                        yield StreamLine(job, host, attempt, chunk_ts, number, stream, line)
        if len(keys) < batch:
            return
        last = keys[-1]
        ts, cursor = last[2], last[0] if backward else last[0] + last[1] - 1


def _texts(conn: sqlite3.Connection, firsts: list[int]) -> dict[int, tuple[str, str]]:
    """The stream and text of the chunks ``firsts``, read only when a page needs them."""
    marks = ", ".join("?" * len(firsts))
    sql = f"SELECT first, stream, lines FROM log_chunks WHERE first IN ({marks})"  # noqa: S608
    return {first: (stream, text) for first, stream, text in conn.execute(sql, firsts)}


def _beyond(ts: float, cursor: int, position: LogPosition, backward: bool) -> bool:
    if backward:
        return (ts, cursor) < (position.ts, position.cursor)
    return (ts, cursor) > (position.ts, position.cursor)


def _keys(
    conn: sqlite3.Connection,
    streams: set[StreamKey],
    position: LogPosition,
    backward: bool,
    window_ms: tuple[int | None, int | None],
    batch: int,
) -> list[tuple[Any, ...]]:
    """The next chunks' keys in (ts, first) order (reversed, ``backward``) past ``position``."""
    if backward:
        where = "(ts < ? OR (ts = ? AND first < ?))"
        order = "ts DESC, first DESC"
    else:
        where = "(ts > ? OR (ts = ? AND first + count - 1 > ?))"
        order = "ts, first"
    args: list[Any] = [position.ts, position.ts, position.cursor]
    jobs = sorted({job for job, _, _ in streams})
    if len(jobs) <= _JOBS_IN_SQL:
        where += f" AND job IN ({', '.join('?' * len(jobs))})"
        args += jobs
    start, end = window_ms
    if start is not None:
        where += " AND CAST(ts * 1000 AS INTEGER) >= ?"
        args.append(start)
    if end is not None:
        where += " AND CAST(ts * 1000 AS INTEGER) < ?"
        args.append(end)
    # Only fixed fragments and placeholders are joined here; every value is a bound argument.
    sql = f"SELECT first, count, ts, job, host, attempt FROM log_chunks WHERE {where}"  # noqa: S608
    return conn.execute(f"{sql} ORDER BY {order} LIMIT ?", [*args, batch]).fetchall()
