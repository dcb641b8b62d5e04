"""Keeping a local directory and an object-storage prefix in step while a job runs.

Checkpoints follow SageMaker's semantics: restored on every host at start, new or changed files
uploaded continuously, local deletions propagated. A file is uploaded only once its size and
modification time held still across two scans, so a file the script is still writing is not
uploaded half-written (and each upload appears whole under its final name, by the store's
contract). Only objects this host restored or uploaded are ever deleted, so hosts sharing a
prefix do not remove each other's files.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainops._errors import StorageError, TrainopsError
from trainops.storage import ObjectStore, download_objects, join_uri

__all__ = ["DirectorySync", "SyncResult"]

Signature = tuple[int, int]  # (size, mtime_ns)


@dataclass(slots=True)
class SyncResult:
    """What one pass changed remotely (relative paths)."""

    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


class DirectorySync:
    """Mirror ``local_dir`` to ``remote_prefix``; see the module docstring for the rules."""

    def __init__(
        self,
        local_dir: Path,
        remote_prefix: str,
        store: ObjectStore,
        *,
        propagate_deletes: bool,
        interval: float = 1.0,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.local_dir = local_dir
        self.remote_prefix = remote_prefix
        self._store = store
        self._propagate_deletes = propagate_deletes
        self._interval = interval
        self._on_error = on_error
        self._known: dict[str, Signature] = {}
        self._previous: dict[str, Signature] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def restore(self) -> int:
        """Copy every object under the prefix into the local directory; returns how many."""
        objects = self._store.list_objects(self.remote_prefix)
        download_objects(self._store, objects, self.local_dir)
        with self._lock:
            for info in objects:
                self._known[info.key] = _signature(self.local_dir / info.key)
        return len(objects)

    def sync_once(self) -> SyncResult:
        """Upload files that are new or changed and were stable since the last scan."""
        return self._sync(require_stable=True)

    def final_sync(self) -> SyncResult:
        """Stop the background thread and upload everything that differs, stable or not."""
        self.stop()
        return self._sync(require_stable=False)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="agent-sync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sync_once()
            except (TrainopsError, OSError) as exc:
                if self._on_error is not None:
                    self._on_error(f"syncing {self.local_dir} to {self.remote_prefix}: {exc}")

    def _sync(self, *, require_stable: bool) -> SyncResult:
        with self._lock:
            current = _scan(self.local_dir)
            result = SyncResult()
            for rel, sig in sorted(current.items()):
                if self._known.get(rel) == sig:
                    continue
                if require_stable and self._previous.get(rel) != sig:
                    continue
                if self._upload(rel, sig):
                    result.uploaded.append(rel)
            if self._propagate_deletes:
                result.deleted = self._delete_vanished(current)
            self._previous = current
            return result

    def _upload(self, rel: str, sig: Signature) -> bool:
        path = self.local_dir / rel
        try:
            self._store.upload(path, join_uri(self.remote_prefix, rel))
        except (StorageError, FileNotFoundError):
            if path.is_file():
                raise
            return False  # removed since the scan; the next pass sees the deletion
        if _signature(path) == sig:
            self._known[rel] = sig
        return True

    def _delete_vanished(self, current: dict[str, Signature]) -> list[str]:
        gone = sorted(rel for rel in self._known if rel not in current)
        for rel in gone:
            self._store.delete(join_uri(self.remote_prefix, rel))
            del self._known[rel]
        return gone


def _scan(root: Path) -> dict[str, Signature]:
    found: dict[str, Signature] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink():
                continue
            try:
                found[path.relative_to(root).as_posix()] = _signature(path)
            except FileNotFoundError:
                continue
    return found


def _signature(path: Path) -> Signature:
    stat = path.stat()
    return (stat.st_size, stat.st_mtime_ns)
