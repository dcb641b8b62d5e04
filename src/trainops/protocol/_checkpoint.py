"""Checkpoint records: what each host's checkpoint sync restored, synced or failed to sync.

A host agent reports them as ``checkpoint`` events (``data`` = the record's fields other than
``job``, ``attempt`` and ``host``, which the event's host key gives); the store keeps one row
each (``trainops.store`` exports the record too). The cost advice reads them (the measured write
time of a checkpoint, the age of what a restart resumed from).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = [
    "CHECKPOINT_KINDS",
    "CheckpointKind",
    "CheckpointRecord",
    "checkpoint_from_event",
]

CheckpointKind = Literal["synced", "restored", "sync_failed", "sync_incomplete"]
CHECKPOINT_KINDS: frozenset[str] = frozenset(get_args(CheckpointKind))
_REASON_CHARS = 2000  # a reason longer than this is cut: it is a sentence, not a log


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """One checkpoint event of one host of one attempt.

    ``kind``: ``synced`` (the last sync uploaded every finished file), ``restored`` (the files a
    host restored at start; ``reason`` says which checkpoint), ``sync_failed`` (an upload failed
    or stalled; ``reason`` says which and why), ``sync_incomplete`` (the last sync left a file
    behind: one still being written when the kill came, or an upload that did not finish).
    ``files``/``bytes``: what the checkpoint holds (synced, restored) or what is left behind
    (incomplete). ``newest_write``: the newest file's write time; ``write_seconds``: how long
    the script took writing the checkpoint's files (first write to last close, as the sync saw
    it); ``upload_seconds``: how long the sync took.
    """

    job: str
    attempt: int
    host: str
    kind: CheckpointKind
    at: float
    files: int
    bytes: int
    newest_write: float | None = None
    write_seconds: float | None = None
    upload_seconds: float | None = None
    reason: str | None = None

    def event_data(self) -> dict[str, Any]:
        """The ``data`` of the agent event that reports it."""
        return {
            "kind": self.kind,
            "at": self.at,
            "files": self.files,
            "bytes": self.bytes,
            "newest_write": self.newest_write,
            "write_seconds": self.write_seconds,
            "upload_seconds": self.upload_seconds,
            "reason": self.reason,
        }


def checkpoint_from_event(
    job: str, attempt: int, host: str, data: Mapping[str, Any], ts: float
) -> CheckpointRecord:
    """The record an agent's ``checkpoint`` event carries; :class:`ValueError` if malformed."""
    kind = data.get("kind")
    if kind not in CHECKPOINT_KINDS:
        raise ValueError(f"checkpoint kind {kind!r} is not one of {sorted(CHECKPOINT_KINDS)}")
    reason = data.get("reason")
    return CheckpointRecord(
        job=job,
        attempt=attempt,
        host=host,
        kind=kind,
        at=_time(data.get("at"), "at") or ts,
        files=_count(data.get("files"), "files"),
        bytes=_count(data.get("bytes"), "bytes"),
        newest_write=_time(data.get("newest_write"), "newest_write"),
        write_seconds=_time(data.get("write_seconds"), "write_seconds"),
        upload_seconds=_time(data.get("upload_seconds"), "upload_seconds"),
        reason=None if reason is None else str(reason)[:_REASON_CHARS],
    )


def _count(value: Any, name: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"checkpoint {name} must be a count, not {value!r}")
    return value


def _time(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"checkpoint {name} must be a number of seconds, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"checkpoint {name} must be finite and not negative, not {value!r}")
    return float(value)
