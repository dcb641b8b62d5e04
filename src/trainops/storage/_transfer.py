"""Parallel transfers between a prefix and a local directory, with progress callbacks.

``workers`` defaults to the store's own figure (``transfer.concurrency`` for s3://), so a
many-small-object transfer keeps that many requests in flight.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from threading import Lock

from trainops._errors import StorageError
from trainops.storage._base import ObjectInfo, ObjectStore, join_uri

__all__ = ["Progress", "download_objects", "upload_tree"]


@dataclass(slots=True)
class Progress:
    """Running totals of one transfer, handed to the progress callback after each object."""

    total_objects: int
    total_bytes: int
    done_objects: int = 0
    done_bytes: int = 0


ProgressCallback = Callable[[Progress], None]


def download_objects(
    store: ObjectStore,
    objects: Iterable[ObjectInfo],
    dest_dir: Path,
    *,
    workers: int | None = None,
    on_progress: ProgressCallback | None = None,
) -> Progress:
    """Download ``objects`` into ``dest_dir`` keeping their keys as relative paths."""
    items = list(objects)
    for info in items:
        _check_key(info.key, dest_dir)
    progress = Progress(total_objects=len(items), total_bytes=sum(i.size for i in items))
    lock = Lock()

    def fetch(info: ObjectInfo) -> None:
        store.download(info.uri, dest_dir / info.key, expected_size=info.size)
        with lock:
            progress.done_objects += 1
            progress.done_bytes += info.size
            if on_progress is not None:
                on_progress(progress)

    _run_all(fetch, items, store.workers if workers is None else workers)
    return progress


def upload_tree(
    store: ObjectStore,
    local_dir: Path,
    prefix: str,
    *,
    workers: int | None = None,
    on_progress: ProgressCallback | None = None,
) -> list[str]:
    """Upload every file under ``local_dir`` to ``prefix/<relative path>``; returns the URIs."""
    files = sorted(p for p in local_dir.rglob("*") if p.is_file() and not p.is_symlink())
    progress = Progress(total_objects=len(files), total_bytes=sum(p.stat().st_size for p in files))
    lock = Lock()
    uris: list[str] = []

    def send(path: Path) -> None:
        uri = join_uri(prefix, path.relative_to(local_dir).as_posix())
        store.upload(path, uri)
        with lock:
            uris.append(uri)
            progress.done_objects += 1
            progress.done_bytes += path.stat().st_size
            if on_progress is not None:
                on_progress(progress)

    _run_all(send, files, store.workers if workers is None else workers)
    return sorted(uris)


def _run_all(action: Callable[..., None], items: list, workers: int) -> None:  # type: ignore[type-arg]
    if not items:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(items)))) as pool:
        futures = [pool.submit(action, item) for item in items]
        try:
            for future in futures:
                future.result()
        finally:
            for future in futures:
                future.cancel()  # one failed: do not start the rest


def _check_key(key: str, dest_dir: Path) -> None:
    target = os.path.normpath(dest_dir / key)
    if key.startswith("/") or not target.startswith(os.path.normpath(dest_dir) + os.sep):
        raise StorageError(f"object key {key!r} would be written outside {dest_dir}")
