"""``file://`` object storage: a directory tree, with uploads made atomic by rename.

Symbolic links under a prefix are not objects: a listing skips them (as ``upload_tree`` does),
so nothing reads through a link out of the directory it was given.

Copies stay in the kernel: ``os.copy_file_range`` (a reflink on filesystems that share extents),
falling back to ``shutil.copyfile`` (``sendfile``) where the kernel or filesystem refuses.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from trainops._errors import StorageError
from trainops.storage._base import ByteCallback, ObjectInfo, ObjectStore, split_uri

__all__ = ["FileStore"]

_CHUNK = 1 << 20


class FileStore(ObjectStore):
    """Objects are files under the URI's path; keys are relative paths with ``/``."""

    scheme = "file"

    def _list(self, prefix: str) -> list[ObjectInfo]:
        root = _path(prefix)
        if root.is_file():
            return [ObjectInfo(uri=prefix, key=root.name, size=root.stat().st_size)]
        if not root.is_dir():
            return []
        found = []
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if name.endswith(".part") and name.startswith("."):
                    continue  # an upload in flight: not an object yet
                full = Path(dirpath) / name
                if full.is_symlink():
                    continue  # a link is not an object (it may point out of the prefix)
                key = full.relative_to(root).as_posix()
                # Not as_uri(): it percent-encodes, and a URI here is read back as a plain path.
                uri = f"file://{full.as_posix()}"
                found.append(ObjectInfo(uri=uri, key=key, size=full.stat().st_size))
        return found

    def _download(self, uri: str, dest: Path, size: int | None = None) -> None:
        try:
            copy_file(_path(uri), dest)
        except FileNotFoundError:
            raise StorageError(f"{uri}: no such object") from None

    def _upload(
        self,
        src: Path,
        uri: str,
        on_bytes: ByteCallback | None,
        verify: Callable[[], None] | None,
    ) -> None:
        if on_bytes is None:
            _write_atomic(_path(uri), lambda tmp: copy_file(src, tmp), verify)
        else:
            _write_atomic(_path(uri), lambda tmp: _copy_reporting(src, tmp, on_bytes), verify)

    def _put_bytes(self, uri: str, data: bytes) -> None:
        _write_atomic(_path(uri), lambda tmp: tmp.write_bytes(data))

    def _get_bytes(self, uri: str) -> bytes:
        try:
            return _path(uri).read_bytes()
        except FileNotFoundError:
            raise StorageError(f"{uri}: no such object") from None

    def _get_range(self, uri: str, start: int, end: int) -> bytes:
        try:
            with _path(uri).open("rb") as handle:
                return os.pread(handle.fileno(), end - start, start)
        except (FileNotFoundError, IsADirectoryError):
            raise StorageError(f"{uri}: no such object") from None

    def _delete(self, uri: str) -> None:
        _path(uri).unlink(missing_ok=True)

    def _exists(self, uri: str) -> bool:
        return _path(uri).is_file()


def _path(uri: str) -> Path:
    _scheme, rest = split_uri(uri)
    return Path(rest)


def copy_file(src: Path, dest: Path) -> None:
    """Copy ``src`` to a new ``dest`` without moving the bytes through Python."""
    if hasattr(os, "copy_file_range"):
        with src.open("rb") as reader, dest.open("wb") as writer:
            size = os.fstat(reader.fileno()).st_size
            try:
                copied = 0
                while copied < size:
                    step = os.copy_file_range(reader.fileno(), writer.fileno(), size - copied)
                    if step == 0:
                        break  # the file shrank under us; what was there is copied
                    copied += step
                return
            except OSError:
                pass  # EXDEV, ENOSYS, EINVAL...: the kernel will not; copy the ordinary way
    shutil.copyfile(src, dest)


def _copy_reporting(src: Path, dest: Path, on_bytes: ByteCallback) -> None:
    with src.open("rb") as reader, dest.open("wb") as writer:
        while chunk := reader.read(_CHUNK):
            writer.write(chunk)
            on_bytes(len(chunk))


def _write_atomic(
    target: Path, write: Callable[[Path], object], verify: Callable[[], None] | None = None
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.urandom(4).hex()}.part")
    try:
        write(tmp)
        if verify is not None:
            verify()
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
