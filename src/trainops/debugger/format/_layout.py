"""Where smdebug's files live under a trial's directory or prefix (``core/locations.py``).

::

    events/<step:012d>/<step:012d>_<worker>.tfevents
    index/<step // 1000:09d>/<step:012d>_<worker>.json
    collections/000000000/<worker>_collections.json
    training_job_end.ts

Paths here are relative keys with ``/`` separators, the same on a disk and in a bucket.
Worker names are smdebug's: ``worker_<rank>`` (``worker_0`` outside distributed training).
"""

from __future__ import annotations

import re

__all__ = [
    "COLLECTIONS_DIR",
    "DEFAULT_WORKER",
    "END_MARKER",
    "EVENTS_DIR",
    "INDEX_DIR",
    "StepKey",
    "check_worker",
    "collections_key",
    "event_file_key",
    "index_key",
    "parse_index_key",
    "worker_name",
]

EVENTS_DIR = "events"
INDEX_DIR = "index"
COLLECTIONS_DIR = "collections/000000000"
END_MARKER = "training_job_end.ts"
DEFAULT_WORKER = "worker_0"
_INDEX_KEY = re.compile(r"index/(\d{9})/(\d{12})_(.+)\.json")
_WORKER = re.compile(r"[A-Za-z0-9_.:\-]{1,200}")


def worker_name(rank: int | None = None) -> str:
    """smdebug's name for the worker of ``rank`` (``worker_0`` when not distributed)."""
    return DEFAULT_WORKER if rank is None else f"worker_{int(rank)}"


def check_worker(worker: str) -> str:
    if not _WORKER.fullmatch(worker) or worker.startswith("."):
        raise ValueError(f"worker name {worker!r} must be 1-200 of [A-Za-z0-9_.:-]")
    return worker


def event_file_key(step: int, worker: str) -> str:
    return f"{EVENTS_DIR}/{step:012d}/{step:012d}_{worker}.tfevents"


def index_key(step: int, worker: str) -> str:
    return f"{INDEX_DIR}/{step // 1000:09d}/{step:012d}_{worker}.json"


def collections_key(worker: str) -> str:
    return f"{COLLECTIONS_DIR}/{worker}_collections.json"


class StepKey:
    """An index key parsed: its step and worker."""

    __slots__ = ("step", "worker")

    def __init__(self, step: int, worker: str) -> None:
        self.step, self.worker = step, worker


def parse_index_key(key: str) -> StepKey | None:
    """The step and worker of ``index/.../<step>_<worker>.json``; ``None`` for any other key
    (a temporary file, a file in the wrong folder, a worker name out of the alphabet)."""
    match = _INDEX_KEY.fullmatch(key)
    if match is None or not _WORKER.fullmatch(match.group(3)):
        return None
    step = int(match.group(2))
    if int(match.group(1)) != step // 1000:
        return None
    return StepKey(step, match.group(3))
