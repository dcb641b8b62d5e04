"""Copying a TensorBoard log directory to an object-store prefix while it grows.

Event files are appended to while the job runs, so their objects are rewritten as they grow:
each pass uploads an event file again when it holds more whole records than its object does, and
only the bytes up to the end of the last whole record (:func:`complete_length`), so an object
always ends on a record boundary, however the writer's appends and the reads interleave (an
object store replaces an object as a whole: ``file://`` renames a temporary file into place,
``s3://`` PUTs). Any other file (a plugin's config) is uploaded once it has stayed unchanged
for a pass, and at the final pass whatever it is. Nothing is ever deleted remotely.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from trainops._errors import TrainopsError
from trainops.data import masked_crc32c
from trainops.storage import ObjectStore, join_uri
from trainops.tensorboard._writer import FILE_MARK

__all__ = ["EventSync", "complete_length"]

_HEAD = struct.Struct("<QI")
_FRAMING = 16  # 8-byte length + its CRC + the data's CRC
Signature = tuple[int, int, int]  # (size, mtime_ns, inode)
_UNSEEN: Signature = (-1, -1, -1)


def complete_length(data: bytes | bytearray | memoryview, start: int = 0) -> int:
    """Where the last whole TFRecord of ``data`` ends, scanning from ``start`` (a record
    boundary); a torn or corrupt header stops the scan, so what follows is never counted."""
    offset, size = start, len(data)
    while offset + _FRAMING <= size:
        length, crc = _HEAD.unpack_from(data, offset)
        if crc != masked_crc32c(data[offset : offset + 8]):
            break
        end = offset + _FRAMING + length
        if end > size:
            break
        offset = end
    return offset


@dataclass(slots=True)
class _Remote:
    """What is known of one local file and of its object."""

    seen: Signature  # the local file's signature at the last pass
    sent: Signature | None = None  # other files: the signature of what the object holds
    whole: int = 0  # event files: bytes of whole records found so far
    uploaded: int = 0  # event files: bytes the object holds (0: no object)


class EventSync:
    """Mirror ``local_dir`` to ``remote_prefix`` in passes (:meth:`sync_once`); one caller at
    a time."""

    def __init__(self, local_dir: Path, remote_prefix: str, store: ObjectStore) -> None:
        self.local_dir = local_dir
        self.remote_prefix = remote_prefix
        self.store = store
        self._files: dict[str, _Remote] = {}

    def sync_once(self, *, final: bool = False) -> list[str]:
        """One pass; returns the relative paths uploaded. ``final``: the writers are done, so
        files that are not event files go up even if they changed since the last pass. The
        first failure is raised once every other file had its turn."""
        uploaded: list[str] = []
        failure: Exception | None = None
        for rel, sig in _scan(self.local_dir).items():
            try:
                sent = self._events(rel, sig) if FILE_MARK in rel else self._other(rel, sig, final)
            except FileNotFoundError:
                continue  # removed since the scan
            except (OSError, TrainopsError) as exc:
                failure = failure or exc
                continue
            if sent:
                uploaded.append(rel)
        if failure is not None:
            raise failure
        return uploaded

    @property
    def uploaded(self) -> list[str]:
        """The relative paths that have an object."""
        return sorted(r for r, s in self._files.items() if s.uploaded or s.sent is not None)

    def uploaded_bytes(self, rel: str) -> int:
        """How many bytes of the event file ``rel`` its object holds (0: no object yet)."""
        state = self._files.get(rel)
        return 0 if state is None else state.uploaded

    def _events(self, rel: str, sig: Signature) -> bool:
        state = self._files.get(rel)
        if state is not None and state.seen == sig and state.uploaded == state.whole:
            return False
        data = (self.local_dir / rel).read_bytes()
        grown = state is not None and state.seen[2] == sig[2] and len(data) >= state.whole
        state = state if grown and state is not None else _Remote(sig)  # else new or rewritten
        state.seen = sig
        state.whole = complete_length(data, state.whole)
        self._files[rel] = state
        if state.whole == state.uploaded:
            return False
        self.store.put_bytes(join_uri(self.remote_prefix, rel), data[: state.whole])
        state.uploaded = state.whole
        return True

    def _other(self, rel: str, sig: Signature, final: bool) -> bool:
        state = self._files.setdefault(rel, _Remote(_UNSEEN))
        settled, state.seen = state.seen == sig, sig
        if state.sent == sig or not (settled or final):
            return False  # sent already, or changed since the last pass: wait until it settles
        path = self.local_dir / rel
        data = path.read_bytes()
        if _signature(path) != sig:
            return False  # changed while read
        self.store.put_bytes(join_uri(self.remote_prefix, rel), data)
        state.sent = sig
        return True


def _signature(path: Path) -> Signature:
    stat = path.stat()
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _scan(root: Path) -> dict[str, Signature]:
    """Relative path -> signature of every regular file under ``root`` (no symbolic links,
    no hidden or temporary names)."""
    found: dict[str, Signature] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(dirpath) / name
            if name.startswith(".") or path.is_symlink():
                continue
            try:
                found[path.relative_to(root).as_posix()] = _signature(path)
            except FileNotFoundError:
                continue
    return found
