"""Reads for charts and followers: a metric's series downsampled for drawing: its time span cut into buckets, each keeping the
minimum, maximum and last value of its points and how many there were.

Read straight from ``metric_chunks`` (one row per batch of points sharing a time): a chunk's
points all fall in one bucket, so a chunk's minimum and maximum come from its packed values in C
(``array``'s ``min``/``max``) and no per-point object is ever made. 400,000 points in 2,000
chunks are a few milliseconds of work. And where a log's last lines start
(:func:`read_log_tail_cursor`), found from the newest chunk back.
"""

from __future__ import annotations

import sqlite3
import sys
from array import array
from dataclasses import dataclass

__all__ = ["SeriesBucket", "read_log_tail_cursor", "read_metric_series"]


@dataclass(slots=True)
class SeriesBucket:
    """The points of one time bucket: first and last time, min, max, last value, count."""

    start: float
    end: float
    low: float
    high: float
    last: float
    count: int


def read_metric_series(
    conn: sqlite3.Connection, job: str, name: str, buckets: int
) -> list[SeriesBucket]:
    """``job``'s metric ``name`` in at most ``buckets`` time buckets (empty ones left out)."""
    span = conn.execute(
        "SELECT MIN(ts), MAX(ts) FROM metric_chunks WHERE job = ? AND name = ?", (job, name)
    ).fetchone()
    if span[0] is None:
        return []
    first, width = span[0], (span[1] - span[0]) / max(1, buckets)
    found: dict[int, SeriesBucket] = {}
    rows = conn.execute(
        "SELECT ts, count, value, vals FROM metric_chunks WHERE job = ? AND name = ?"
        " ORDER BY ts, id",
        (job, name),
    )
    for ts, count, value, packed in rows:
        low, high = (value, value) if count == 1 or packed is None else _bounds(packed)
        index = min(buckets - 1, int((ts - first) / width)) if width > 0 else 0
        bucket = found.get(index)
        if bucket is None:
            found[index] = SeriesBucket(ts, ts, low, high, value, count)
        else:
            bucket.end, bucket.last, bucket.count = ts, value, bucket.count + count
            bucket.low, bucket.high = min(bucket.low, low), max(bucket.high, high)
    return [found[i] for i in sorted(found)]


def _bounds(blob: bytes) -> tuple[float, float]:
    values = array("d")
    values.frombytes(blob)
    if sys.byteorder != "little":
        values.byteswap()
    return min(values), max(values)


def read_log_tail_cursor(conn: sqlite3.Connection, job: str, host: str | None, lines: int) -> int:
    """The cursor to read ``job``'s last ``lines`` lines (of ``host``) after: chunks are walked
    newest first on the ``(job, first)`` index, so a 200,000-line log costs what a short one does.
    """
    sql = "SELECT first, count FROM log_chunks WHERE job = ?"
    args: list[object] = [job]
    if host is not None:
        sql += " AND host = ?"
        args.append(host)
    seen = 0
    for first, count in conn.execute(sql + " ORDER BY first DESC", args):
        seen += int(count)
        if seen >= lines:
            return int(first) + (seen - lines) - 1
    return 0
