"""Checkpoint manifests: what the uploader and the restore agree a complete checkpoint file is.

Each host's checkpoint sync keeps one manifest under the reserved folder
:data:`RESERVED_DIR` of the checkpoint prefix (``.trainops/manifest-<host>.json``). It lists every
file the host knows the prefix holds (uploaded or restored) with its size, SHA-256 and write
time, and it is written only after the files it lists are visible, so it never names a file
that is not there yet. The uploader never uploads a file that was still open for writing when
the script's processes were killed (see ``DirectorySync.note_writers``).

A file is overwritten in place (a script that replaces ``step.pt`` every few seconds), so the
manifest also says what is about to be uploaded: before an upload, the manifest is written again
with the new version's size and SHA-256 under ``pending`` (the listed version stays under
``files``). Whatever moment the host dies at, the object under the file's name is then the
listed version or the pending one, and both are restorable; only bytes neither names are refused.
A manifest without ``pending`` (written before it existed) reads as before.

The restore holds the same rule from the other side: a file some manifest lists is restored only
if its size and checksum match one listing (a torn or half-replaced object is skipped, with its
reason); a file no manifest lists (put there by someone else: a previous job's checkpoint, or a
copy made by hand) is restored as it is, as SageMaker does. The reserved folder itself is never
restored into the script's checkpoint directory, and a local file under it is never uploaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops._errors import TrainopsError
from trainops.storage import ObjectInfo, ObjectStore, join_uri

__all__ = [
    "RESERVED_DIR",
    "FileEntry",
    "Listing",
    "file_entry",
    "is_reserved",
    "manifest_key",
    "read_listings",
    "write_manifest",
]

RESERVED_DIR = ".trainops"
_PREFIX = f"{RESERVED_DIR}/manifest-"
_VERSION = 1
_CHUNK = 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a larger one is not read (a million files fit)


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file as a manifest lists it."""

    size: int
    sha256: str
    mtime: float  # when the script last wrote it (seconds since the epoch)


@dataclass(frozen=True, slots=True)
class Listing:
    """One file as one host's manifest lists it, with who wrote the manifest and when."""

    entry: FileEntry
    host: str
    attempt: int
    pending: bool = False  # announced before its upload, not yet confirmed by a later manifest


def manifest_key(host: str) -> str:
    """The key of ``host``'s manifest, relative to the checkpoint prefix."""
    return f"{_PREFIX}{host}.json"


def is_reserved(rel: str) -> bool:
    """Whether ``rel`` (relative to the checkpoint directory) is under the reserved folder."""
    return rel == RESERVED_DIR or rel.startswith(f"{RESERVED_DIR}/")


def file_entry(path: Path) -> FileEntry:
    """``path``'s size, SHA-256 and write time, read now."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        stat = os.fstat(handle.fileno())
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return FileEntry(stat.st_size, digest.hexdigest(), stat.st_mtime)


def write_manifest(
    store: ObjectStore,
    prefix: str,
    host: str,
    attempt: int,
    entries: Mapping[str, FileEntry],
    pending: Mapping[str, FileEntry] | None = None,
) -> None:
    """Make ``host``'s manifest list ``entries``, and ``pending`` as the versions about to be
    uploaded (one atomic put; readers see old or new)."""
    body: dict[str, Any] = {
        "version": _VERSION,
        "host": host,
        "attempt": attempt,
        "written_at": time.time(),
        "files": {
            rel: {"size": e.size, "sha256": e.sha256, "mtime": e.mtime}
            for rel, e in sorted(entries.items())
        },
    }
    if pending:
        body["pending"] = {
            rel: {"size": e.size, "sha256": e.sha256, "mtime": e.mtime}
            for rel, e in sorted(pending.items())
        }
    store.put_bytes(join_uri(prefix, manifest_key(host)), json.dumps(body).encode())


def read_listings(
    store: ObjectStore, objects: Iterable[ObjectInfo]
) -> tuple[dict[str, list[Listing]], list[str]]:
    """Every manifest among ``objects``: relative path -> its listings, and one sentence per
    manifest that could not be read (it is then ignored: its files count as unlisted)."""
    listings: dict[str, list[Listing]] = {}
    problems: list[str] = []
    for info in objects:
        if not (info.key.startswith(_PREFIX) and info.key.endswith(".json")):
            continue
        if info.size > MAX_MANIFEST_BYTES:
            problems.append(f"{info.key}: {info.size} bytes, over {MAX_MANIFEST_BYTES}; ignored")
            continue
        try:
            host, attempt, files, pending = _parse(store.get_bytes(info.uri))
        except (TrainopsError, OSError, ValueError, TypeError, KeyError) as exc:
            problems.append(f"{info.key}: unreadable manifest ({exc}); ignored")
            continue
        for rel, entry in files.items():
            listings.setdefault(rel, []).append(Listing(entry, host, attempt))
        for rel, entry in pending.items():
            listings.setdefault(rel, []).append(Listing(entry, host, attempt, pending=True))
    return listings, problems


def _parse(raw: bytes) -> tuple[str, int, dict[str, FileEntry], dict[str, FileEntry]]:
    data: Any = json.loads(raw)
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        raise ValueError("not a version-1 manifest")
    files = _parse_files(data["files"], "files")
    pending = _parse_files(data.get("pending", {}), "pending")
    return str(data.get("host", "?")), int(data.get("attempt", 0)), files, pending


def _parse_files(files: Any, what: str) -> dict[str, FileEntry]:
    if not isinstance(files, dict):
        raise TypeError(f"its {what} are not a mapping")
    parsed = {}
    for rel, item in files.items():
        size, digest, mtime = item["size"], item["sha256"], item["mtime"]
        if not isinstance(size, int) or not isinstance(digest, str):
            raise TypeError(f"bad entry for {rel!r}")
        parsed[str(rel)] = FileEntry(size, digest, float(mtime))
    return parsed
