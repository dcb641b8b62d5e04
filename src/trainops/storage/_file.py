"""``file://`` object storage: a directory tree, with uploads made atomic by rename.

Symbolic links under a prefix are not objects: a listing skips them (as ``upload_tree`` does),
so nothing reads through a link out of the directory it was given. Reads open the object with
``O_NOFOLLOW`` and take only a regular file, so a link (or a FIFO) swapped in after the listing
is refused rather than followed: a job's script that can write under a prefix cannot make a
later read of it return another file (the API token, another job's data).

Copies stay in the kernel: ``os.copy_file_range`` (a reflink on filesystems that share extents),
falling back to a copy in 1 MiB chunks where the kernel or filesystem refuses.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from trainops._errors import StorageError
from trainops.storage._base import ByteCallback, ObjectInfo, ObjectStore, split_uri

__all__ = ["FileStore"]

_CHUNK = 1 << 20


class FileStore(ObjectStore):
    """Objects are files under the URI's path; keys are relative paths with ``/``."""

    scheme = "file"

    def _list(self, prefix: str) -> list[ObjectInfo]:
        root = _path(prefix)
        if (single := _regular(root)) is not None:
            return [ObjectInfo(uri=prefix, key=root.name, size=single.st_size)]
        if root.is_symlink() or not root.is_dir():
            return []
        found = []
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if name.endswith(".part") and name.startswith("."):
                    continue  # an upload in flight: not an object yet
                full = Path(dirpath) / name
                info = _regular(full)
                if info is None:
                    continue  # a link is not an object (it may point out of the prefix)
                key = full.relative_to(root).as_posix()
                # Not as_uri(): it percent-encodes, and a URI here is read back as a plain path.
                uri = f"file://{full.as_posix()}"
                found.append(ObjectInfo(uri=uri, key=key, size=info.st_size))
        return found

    def _download(self, uri: str, dest: Path, size: int | None = None) -> None:
        with _open_object(uri) as reader:
            copy_file(reader, dest)

    def _upload(
        self,
        src: Path,
        uri: str,
        on_bytes: ByteCallback | None,
        verify: Callable[[], None] | None,
    ) -> None:
        if on_bytes is None:
            _write_atomic(_path(uri), lambda tmp: _copy_path(src, tmp), verify)
        else:
            _write_atomic(_path(uri), lambda tmp: _copy_reporting(src, tmp, on_bytes), verify)

    def _put_bytes(self, uri: str, data: bytes) -> None:
        _write_atomic(_path(uri), lambda tmp: tmp.write_bytes(data))

    def _get_bytes(self, uri: str) -> bytes:
        with _open_object(uri) as handle:
            return handle.read()

    def _get_range(self, uri: str, start: int, end: int) -> bytes:
        with _open_object(uri) as handle:
            return os.pread(handle.fileno(), end - start, start)

    def _delete(self, uri: str) -> None:
        _path(uri).unlink(missing_ok=True)

    def _exists(self, uri: str) -> bool:
        return _regular(_path(uri)) is not None


def _path(uri: str) -> Path:
    _scheme, rest = split_uri(uri)
    return Path(rest)


def _regular(path: Path) -> os.stat_result | None:
    """``path``'s own status if it is a regular file (not a link to one), else None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def _open_object(uri: str) -> BinaryIO:
    """The object at ``uri`` open for reading: never through a symbolic link in its last
    part, and only a regular file (opened without blocking, so a FIFO cannot hang the read)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(_path(uri), flags)
    except FileNotFoundError:
        raise StorageError(f"{uri}: no such object") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StorageError(f"{uri}: a symbolic link, not an object") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StorageError(f"{uri}: no such object (not a regular file)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _copy_path(src: Path, dest: Path) -> None:
    with src.open("rb") as reader:
        copy_file(reader, dest)


def copy_file(reader: BinaryIO, dest: Path) -> None:
    """Copy the open file ``reader`` to a new ``dest`` without moving the bytes through
    Python where the kernel can copy them."""
    with dest.open("wb") as writer:
        if hasattr(os, "copy_file_range"):
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
        reader.seek(0)
        writer.seek(0)
        writer.truncate()
        shutil.copyfileobj(reader, writer, _CHUNK)


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
