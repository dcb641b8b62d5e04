"""Versioned schema migrations: numbered SQL files applied in order, recorded in ``schema_version``.

Each file ``NNNN_name.sql`` in ``migrations/`` moves the schema from version ``NNNN - 1`` to
``NNNN``. Every migration runs in one ``BEGIN IMMEDIATE`` transaction that re-reads the version
first, so two processes opening the same new database cannot both apply it.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from importlib import resources

from trainops._errors import TrainopsError

__all__ = ["Migration", "SchemaVersionError", "apply_migrations", "load_migrations"]

_FILE_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class SchemaVersionError(TrainopsError):
    """The database was written by a newer trainops than this one."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: ``version`` and the SQL that reaches it."""

    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    """The packaged migrations, in version order; versions must be 1, 2, 3, ... without gaps."""
    folder = resources.files("trainops.store").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration files are not numbered 1..n: {[m.name for m in found]}")
    return found


def current_version(conn: sqlite3.Connection) -> int:
    """The schema version of the open database; 0 for an empty one."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def apply_migrations(
    conn: sqlite3.Connection, migrations: list[Migration], where: str = "database"
) -> int:
    """Bring the database up to the last of ``migrations``; returns the resulting version.

    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    latest = migrations[-1].version if migrations else 0
    version = current_version(conn)
    if version > latest:
        raise SchemaVersionError(
            f"{where} has schema version {version}, but this trainops knows versions up to "
            f"{latest}: it was written by a newer trainops; upgrade trainops to open it"
        )
    for migration in migrations:
        if migration.version > version:
            _apply_one(conn, migration)
    return current_version(conn)


def _apply_one(conn: sqlite3.Connection, migration: Migration) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        if int(row[0] or 0) < migration.version:
            for statement in split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (``executescript`` would commit on its own)."""
    statements, buffer = [], ""
    for line in sql.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete SQL statement at the end of a migration: {buffer[:80]!r}")
    return statements
