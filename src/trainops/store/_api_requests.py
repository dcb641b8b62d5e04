"""The api_requests table: what a SageMaker API request sent that is given back as sent
(schema version 17).

A row holds a JSON object of the request's kept members (which ones is the server's business:
``server/_schema.py``) for a resource named by its kind and its name as stored. It is written
once, in the transaction that makes the resource (``MetadataStore.transaction``), and never
changed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

__all__ = ["ApiRequestTables"]


class ApiRequestTables:
    """The kept-request half of :class:`~trainops.store.MetadataStore` (mixed into it)."""

    if TYPE_CHECKING:  # what it uses of the store it is mixed into (declared, not defined here)

        def _write(self, topic: str = ...) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]: ...

    def put_api_request(self, kind: str, name: str, request: Mapping[str, Any]) -> None:
        """Keep ``request`` (a JSON object) for the ``kind`` resource ``name``; a resource that
        has one keeps its first (a name is made once)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO api_requests (kind, name, request) VALUES (?, ?, ?)"
                " ON CONFLICT (kind, name) DO NOTHING",
                (kind, name, json.dumps(dict(request), sort_keys=True)),
            )

    def api_request(self, kind: str, name: str) -> dict[str, Any]:
        """The request kept for the resource; an empty object where none was."""
        rows = self._read(
            "SELECT request FROM api_requests WHERE kind = ? AND name = ?", (kind, name)
        )
        if not rows:
            return {}
        kept = json.loads(rows[0]["request"])
        return kept if isinstance(kept, dict) else {}
