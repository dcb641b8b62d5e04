"""Where a trial's files come from: a local directory or any storage URI, behind one interface.

Keys are relative ``/`` paths (``index/000000000/000000000000_worker_0.json``). Every read is
bounded: a file larger than the caller's limit is an error naming it, never a big allocation.
A local directory is read without following a symlink out of it.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from trainops.debugger.exceptions import DebugFormatError

if TYPE_CHECKING:
    from trainops._settings import Settings

__all__ = ["LocalSource", "StorageSource", "TrialSource", "source_for"]


class TrialSource(ABC):
    """Lists and reads a trial's files."""

    location: str

    @abstractmethod
    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        """Every key under ``prefix`` (a folder key such as ``"index"``), sorted; with
        ``start_after`` (relative to ``prefix``) only the later ones."""

    @abstractmethod
    def read(self, key: str, max_bytes: int) -> bytes:
        """The whole file ``key``, refused if larger than ``max_bytes``."""

    @abstractmethod
    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of ``key`` (fewer if the file is shorter)."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...


class LocalSource(TrialSource):
    """A directory on this machine."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.location = str(self.root)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root):
            raise DebugFormatError(f"{self.root}: {key!r} leads outside the trial's directory")
        return path

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        base = self.root / prefix
        after = f"{prefix}/{start_after}" if start_after is not None else None
        keys: list[str] = []
        for folder, dirs, files in os.walk(base):  # os.walk does not follow symlinked folders
            rel = Path(folder).relative_to(self.root).as_posix()
            dirs[:] = sorted(
                d for d in dirs if not d.startswith(".") and _may_follow(rel, d, after)
            )
            found = (f"{rel}/{name}" for name in files if not name.startswith("."))
            keys += [key for key in found if after is None or key > after]
        return sorted(keys)

    def read(self, key: str, max_bytes: int) -> bytes:
        path = self._path(key)
        with open(path, "rb") as stream:
            data = stream.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise DebugFormatError(f"{path}: larger than the {max_bytes}-byte limit")
        return data

    def read_range(self, key: str, start: int, end: int) -> bytes:
        with open(self._path(key), "rb") as stream:
            stream.seek(start)
            return stream.read(max(0, end - start))

    def exists(self, key: str) -> bool:
        try:
            return self._path(key).is_file()
        except DebugFormatError:
            return False


def _may_follow(folder: str, name: str, after: str | None) -> bool:
    """Whether folder ``folder/name`` can hold a key after ``after`` (keys sort by folder)."""
    return after is None or f"{folder}/{name}/" >= after[: len(folder) + len(name) + 2]


class StorageSource(TrialSource):
    """A prefix in any store ``trainops.storage`` knows (``s3://``, ``file://``)."""

    def __init__(self, uri: str, settings: Settings | None = None) -> None:
        from trainops._settings import Settings
        from trainops.storage import store_for

        self.location = uri.rstrip("/")
        self._store = store_for(self.location, settings or Settings.load())

    def _uri(self, key: str) -> str:
        return f"{self.location}/{key}"

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        objects = self._store.list_objects(self._uri(prefix) + "/", start_after=start_after)
        return sorted(f"{prefix}/{info.key}" for info in objects)

    def read(self, key: str, max_bytes: int) -> bytes:
        data = self._store.get_range(self._uri(key), 0, max_bytes + 1)
        if len(data) > max_bytes:
            raise DebugFormatError(f"{self._uri(key)}: larger than the {max_bytes}-byte limit")
        return data

    def read_range(self, key: str, start: int, end: int) -> bytes:
        return self._store.get_range(self._uri(key), start, end)

    def exists(self, key: str) -> bool:
        return self._store.exists(self._uri(key))


def source_for(location: str, settings: Settings | None = None) -> TrialSource:
    """A local path or ``file://`` URI becomes a :class:`LocalSource`; another URI a store."""
    if location.startswith("file://"):
        return LocalSource(location[len("file://") :])
    if "://" in location:
        return StorageSource(location, settings)
    return LocalSource(location)
