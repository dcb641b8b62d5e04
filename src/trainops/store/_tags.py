"""The tags table: key-value tags of a named resource (schema version 15).

A resource is named by its kind (the resource type of a SageMaker ARN: ``training-job``,
``hyper-parameter-tuning-job``) and its name as stored. :meth:`TagTables.put_tags` merges tags
and refuses, in one transaction, a set that would exceed the limit, so two concurrent calls can
never leave more than the limit behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from trainops._errors import TrainopsError

__all__ = ["TAGGED_KINDS", "TagLimitError", "TagTables"]

#: The kinds of resource that carry tags, and the table and column that name them.
TAGGED_KINDS: Mapping[str, str] = {
    "training-job": "SELECT name FROM jobs WHERE lower(name) = lower(?) ORDER BY name = ? DESC",
    "hyper-parameter-tuning-job": (
        "SELECT name FROM tuning_jobs WHERE lower(name) = lower(?) ORDER BY name = ? DESC"
    ),
}


class TagLimitError(TrainopsError):
    """The tags would exceed the resource's limit; ``count`` is how many it would have."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"{count} tags would exceed the limit of {limit}")
        self.count, self.limit = count, limit


class TagTables:
    """The tag half of :class:`~trainops.store.MetadataStore` (mixed into it)."""

    if TYPE_CHECKING:  # what it uses of the store it is mixed into (declared, not defined here)

        def _write(self, topic: str = ...) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]: ...

    def tagged_name(self, kind: str, name: str) -> str | None:
        """The stored name of the ``kind`` resource named ``name`` in any case (an ARN spells
        names in lower case): the exact one first; None if there is none."""
        rows = self._read(TAGGED_KINDS[kind], (name, name))
        return str(rows[0]["name"]) if rows else None

    def put_tags(self, kind: str, name: str, tags: Mapping[str, str], limit: int) -> None:
        """Add or overwrite ``tags``; :class:`TagLimitError` (nothing written) if the resource
        would then have more than ``limit``."""
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO tags (kind, name, key, value) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (kind, name, key) DO UPDATE SET value = excluded.value",
                [(kind, name, key, value) for key, value in tags.items()],
            )
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM tags WHERE kind = ? AND name = ?", (kind, name)
            ).fetchone()
            if count > limit:
                raise TagLimitError(int(count), limit)  # rolls the insert back

    def tags(self, kind: str, name: str) -> list[tuple[str, str]]:
        """The resource's tags, ``(key, value)``, in key order."""
        rows = self._read(
            "SELECT key, value FROM tags WHERE kind = ? AND name = ? ORDER BY key", (kind, name)
        )
        return [(str(row["key"]), str(row["value"])) for row in rows]

    def delete_tags(self, kind: str, name: str, keys: Sequence[str]) -> None:
        """Remove the tags of ``keys`` (keys the resource lacks are ignored)."""
        with self._write() as conn:
            conn.executemany(
                "DELETE FROM tags WHERE kind = ? AND name = ? AND key = ?",
                [(kind, name, key) for key in keys],
            )
