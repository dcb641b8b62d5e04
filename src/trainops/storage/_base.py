"""The object-storage contract: URI strings in, policy checks here, transport in subclasses.

Public methods validate the URI once and then call ``_``-prefixed hooks. Every upload makes the
object appear whole under its final name (never a torn object); every download writes to a
temporary file beside the target and renames it only after the size matches.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from trainops._errors import StorageError

__all__ = ["ByteCallback", "ObjectInfo", "ObjectStore", "join_uri", "split_uri"]

ByteCallback = Callable[[int], None]
"""Called with the number of bytes just transferred (a delta, not a running total)."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object found under a prefix; ``key`` is its path relative to that prefix."""

    uri: str
    key: str
    size: int


def split_uri(uri: str) -> tuple[str, str]:
    """``"s3://b/k"`` -> ``("s3", "b/k")``; ``"file:///x"`` -> ``("file", "/x")``."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        raise StorageError(f"{uri!r} is not a URI (expected s3://... or file://...)")
    return scheme, rest


def join_uri(base: str, *parts: str) -> str:
    """Join path parts onto a URI with single slashes."""
    out = base.rstrip("/")
    for part in parts:
        part = part.strip("/")
        if part:
            out = f"{out}/{part}"
    return out


class ObjectStore(ABC):
    """One storage scheme. Instances are cheap to share across threads."""

    scheme: ClassVar[str]

    def child_env(self) -> dict[str, str]:
        """Environment variables a child process needs to build the same store (credentials
        included: pass them to the child's environment only, never to a log)."""
        return {}

    @property
    def workers(self) -> int:
        """How many objects a many-object transfer moves at once by default."""
        return 8

    def list_objects(self, prefix: str, *, start_after: str | None = None) -> list[ObjectInfo]:
        """Every object under ``prefix`` (recursively), sorted by key.

        A prefix naming a single object lists that object, with its base name as key. With
        ``start_after`` (a key relative to ``prefix``), only the keys after it: a reader that
        follows a growing prefix lists what is new, not everything again.
        """
        self._check(prefix)
        if start_after is None:
            return sorted(self._list(prefix), key=lambda info: info.key)
        return sorted(self._list_after(prefix, start_after), key=lambda info: info.key)

    def _list_after(self, prefix: str, start_after: str) -> list[ObjectInfo]:
        """The objects under ``prefix`` whose key sorts after ``start_after``; a store whose
        service can start a listing at a key overrides this."""
        return [info for info in self._list(prefix) if info.key > start_after]

    def download(self, uri: str, dest: Path, expected_size: int | None = None) -> None:
        """Copy the object at ``uri`` to ``dest`` atomically."""
        self._check(uri)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.urandom(4).hex()}.part")
        try:
            self._download(uri, tmp, expected_size)
            size = tmp.stat().st_size
            if expected_size is not None and size != expected_size:
                raise StorageError(f"{uri}: downloaded {size} bytes, expected {expected_size}")
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)

    def upload(
        self,
        src: Path,
        uri: str,
        on_bytes: ByteCallback | None = None,
        *,
        verify: Callable[[], None] | None = None,
    ) -> None:
        """Copy the local file ``src`` to ``uri``; readers see the old object or the new one.

        ``on_bytes`` (optional) hears how many bytes were sent as the upload goes, so a progress
        bar can move during one big file. ``verify`` (optional) is called once every byte of
        ``src`` has been read and before the object becomes visible; if it raises, the upload is
        abandoned and nothing new is visible (a caller uses it to refuse a file that changed
        while it was being read).
        """
        self._check(uri)
        if not src.is_file():
            raise StorageError(f"{src}: not a file, cannot upload")
        self._upload(src, uri, on_bytes, verify)

    def put_bytes(self, uri: str, data: bytes) -> None:
        self._check(uri)
        self._put_bytes(uri, data)

    def get_bytes(self, uri: str) -> bytes:
        self._check(uri)
        return self._get_bytes(uri)

    def get_range(self, uri: str, start: int, end: int) -> bytes:
        """Bytes ``start`` up to (not including) ``end`` of the object, cut at its end."""
        self._check(uri)
        if start < 0 or end < start:
            raise StorageError(f"{uri}: bad byte range {start}-{end}")
        if end == start:
            return b""
        return self._get_range(uri, start, end)

    def delete(self, uri: str) -> None:
        """Remove the object at ``uri``; a missing object is not an error."""
        self._check(uri)
        self._delete(uri)

    def exists(self, uri: str) -> bool:
        self._check(uri)
        return self._exists(uri)

    def _check(self, uri: str) -> None:
        scheme, rest = split_uri(uri)
        if scheme != self.scheme:
            raise StorageError(f"{uri!r}: this store handles {self.scheme}:// only")
        if not rest.strip("/"):
            raise StorageError(f"{uri!r}: empty path")

    @abstractmethod
    def _list(self, prefix: str) -> list[ObjectInfo]: ...

    @abstractmethod
    def _download(self, uri: str, dest: Path, size: int | None = None) -> None:
        """Write the object to ``dest``; ``size`` is the listed size when the caller knows it."""

    @abstractmethod
    def _upload(
        self,
        src: Path,
        uri: str,
        on_bytes: ByteCallback | None,
        verify: Callable[[], None] | None,
    ) -> None: ...

    @abstractmethod
    def _put_bytes(self, uri: str, data: bytes) -> None: ...

    @abstractmethod
    def _get_bytes(self, uri: str) -> bytes: ...

    @abstractmethod
    def _get_range(self, uri: str, start: int, end: int) -> bytes: ...

    @abstractmethod
    def _delete(self, uri: str) -> None: ...

    @abstractmethod
    def _exists(self, uri: str) -> bool: ...
