"""``file://`` object storage: a directory tree, with uploads made atomic by rename."""

from __future__ import annotations

import os
import shutil
import uuid
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
                key = full.relative_to(root).as_posix()
                found.append(ObjectInfo(uri=full.as_uri(), key=key, size=full.stat().st_size))
        return found

    def _download(self, uri: str, dest: Path) -> None:
        try:
            shutil.copyfile(_path(uri), dest)
        except FileNotFoundError:
            raise StorageError(f"{uri}: no such object") from None

    def _upload(self, src: Path, uri: str) -> None:
        target = _path(uri)
        _write_atomic(target, lambda tmp: shutil.copyfile(src, tmp))

    def _upload_reporting(self, src: Path, uri: str, on_bytes: ByteCallback) -> None:
        _write_atomic(_path(uri), lambda tmp: _copy_reporting(src, tmp, on_bytes))

    def _put_bytes(self, uri: str, data: bytes) -> None:
        _write_atomic(_path(uri), lambda tmp: tmp.write_bytes(data))

    def _get_bytes(self, uri: str) -> bytes:
        try:
            return _path(uri).read_bytes()
        except FileNotFoundError:
            raise StorageError(f"{uri}: no such object") from None

    def _delete(self, uri: str) -> None:
        _path(uri).unlink(missing_ok=True)

    def _exists(self, uri: str) -> bool:
        return _path(uri).is_file()


def _path(uri: str) -> Path:
    _scheme, rest = split_uri(uri)
    return Path(rest)


def _copy_reporting(src: Path, dest: Path, on_bytes: ByteCallback) -> None:
    with src.open("rb") as reader, dest.open("wb") as writer:
        while chunk := reader.read(_CHUNK):
            writer.write(chunk)
            on_bytes(len(chunk))


def _write_atomic(target: Path, write: object) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        write(tmp)  # type: ignore[operator]
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
