"""The checkpoints table (schema version 13): one row per checkpoint record an agent reported.

The record itself (:class:`~trainops.protocol.CheckpointRecord`) is part of the agent API.
"""

from __future__ import annotations

import sqlite3
from dataclasses import astuple

from trainops.protocol._checkpoint import CheckpointRecord

__all__ = ["insert_checkpoint", "read_checkpoints"]


def insert_checkpoint(conn: sqlite3.Connection, record: CheckpointRecord) -> None:
    conn.execute(
        "INSERT INTO checkpoints (job, attempt, host, kind, at, files, bytes, newest_write,"
        " write_seconds, upload_seconds, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        astuple(record),
    )


def read_checkpoints(conn: sqlite3.Connection, job: str) -> list[CheckpointRecord]:
    rows = conn.execute(
        "SELECT job, attempt, host, kind, at, files, bytes, newest_write, write_seconds,"
        " upload_seconds, reason FROM checkpoints WHERE job = ? ORDER BY at, rowid",
        (job,),
    ).fetchall()
    return [CheckpointRecord(*row) for row in rows]
