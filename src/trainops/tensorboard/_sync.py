"""Copying a TensorBoard log directory to an object-store prefix while it grows.

Event files are appended to while the job runs, so their objects are rewritten as they grow:
each pass uploads an event file again when it holds more whole records than its object does, and
only the bytes up to the end of the last whole record (:func:`complete_length`), so an object
always ends on a record boundary, however the writer's appends and the reads interleave (an
object store replaces an object as a whole: ``file://`` renames a temporary file into place,
``s3://`` PUTs). Any other file (a plugin's config) is uploaded once it has stayed unchanged
for a pass, and at the final pass whatever it is. Nothing is ever deleted remotely.

The job's script writes these files, and this runs in its agent: no file is read whole into
memory. An event file's records are found by reading their headers in windows of
:data:`WINDOW_BYTES` (a record larger than a window is skipped over by its length), and its
whole records are uploaded from the file itself: up to :data:`IN_MEMORY_BYTES` in one piece, a
larger prefix through a temporary copy made in pieces. Other files are uploaded from the file.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from trainops._errors import TrainopsError
from trainops.data import masked_crc32c
from trainops.storage import ObjectStore, join_uri
from trainops.tensorboard._writer import FILE_MARK

__all__ = ["IN_MEMORY_BYTES", "WINDOW_BYTES", "EventSync", "complete_length"]

#: Bytes of an event file read at a time while looking for its records' ends.
WINDOW_BYTES = 1 << 20
#: Whole records up to this size are uploaded from memory; more through a temporary copy.
IN_MEMORY_BYTES = 8 << 20

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
        self._vouched: dict[str, Signature] = {}

    def vouch(self, files: Mapping[Path, Signature]) -> None:
        """``path -> (size, mtime_ns, inode)``: files of ``local_dir`` that a trusted writer (the
        agent's own :class:`EventFileWriter`, :meth:`~EventFileWriter.whole_files`) left holding
        whole records only; while a file's signature is still that one, a pass takes its size
        instead of reading its records' headers (a file changed since, by anyone, is read)."""
        for path, known in files.items():
            try:
                rel = path.relative_to(self.local_dir).as_posix()
            except ValueError:
                continue
            self._vouched[rel] = known

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
        with (self.local_dir / rel).open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            grown = state is not None and state.seen[2] == sig[2] and size >= state.whole
            state = state if grown and state is not None else _Remote(sig)  # else new or rewritten
            state.seen = sig
            state.whole = self._whole(rel, handle, state.whole, size)
            self._files[rel] = state
            if state.whole == state.uploaded:
                return False
            _put_prefix(self.store, join_uri(self.remote_prefix, rel), handle, state.whole)
        state.uploaded = state.whole
        return True

    def _whole(self, rel: str, handle: BinaryIO, start: int, size: int) -> int:
        """Where the whole records of ``rel`` end: as vouched for, else found by reading."""
        stat = os.fstat(handle.fileno())
        if self._vouched.get(rel) == (size, stat.st_mtime_ns, stat.st_ino):
            return size
        return whole_records(handle, start, size)

    def _other(self, rel: str, sig: Signature, final: bool) -> bool:
        state = self._files.setdefault(rel, _Remote(_UNSEEN))
        settled, state.seen = state.seen == sig, sig
        if state.sent == sig or not (settled or final):
            return False  # sent already, or changed since the last pass: wait until it settles
        path = self.local_dir / rel

        def unchanged() -> None:
            if _signature(path) != sig:
                raise _Changed

        try:
            self.store.upload(path, join_uri(self.remote_prefix, rel), verify=unchanged)
        except _Changed:
            return False  # changed while read
        state.sent = sig
        return True


class _Changed(Exception):
    """A file changed while it was being uploaded (the upload is abandoned)."""


def whole_records(handle: BinaryIO, start: int, size: int) -> int:
    """Where the last whole record of the open file ``handle`` (``size`` bytes) ends, from
    ``start`` (a record boundary): headers read in windows, large records skipped over."""
    fd, offset = handle.fileno(), start
    while offset + _FRAMING <= size:
        window = os.pread(fd, min(WINDOW_BYTES, size - offset), offset)
        scanned = complete_length(window)
        if scanned:
            offset += scanned
            continue
        # The record here does not fit in a window (or its header is torn): its header alone.
        if len(window) < _FRAMING:
            break
        length, crc = _HEAD.unpack_from(window, 0)
        if crc != masked_crc32c(window[:8]) or offset + _FRAMING + length > size:
            break
        offset += _FRAMING + length
    return offset


def _put_prefix(store: ObjectStore, uri: str, handle: BinaryIO, length: int) -> None:
    """Upload the first ``length`` bytes of ``handle``, never holding more than
    :data:`IN_MEMORY_BYTES` of them in memory."""
    fd = handle.fileno()
    if length <= IN_MEMORY_BYTES:
        store.put_bytes(uri, os.pread(fd, length, 0))
        return
    with tempfile.TemporaryDirectory(prefix="trainops-tb-") as scratch:
        copy = Path(scratch) / "prefix"
        with copy.open("wb") as out:
            offset = 0
            while offset < length:
                piece = os.pread(fd, min(WINDOW_BYTES, length - offset), offset)
                if not piece:
                    raise OSError(f"{handle.name}: shorter than its {length} bytes of records")
                out.write(piece)
                offset += len(piece)
        store.upload(copy, uri)


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
