"""The decompressed byte stream of an archive, bounded in what one read and all reads may take.

The compression is recognised by its magic bytes (gzip, bzip2, xz, or none). :class:`BoundedReader`
refuses a single read larger than ``MAX_SINGLE_READ`` (``tarfile`` reads a PAX or GNU long-name
header whole, whatever size it declares) and stops the stream once more than the archive's
expansion cap plus header overhead has been decompressed, so a gzip bomb costs bounded time and
memory even before the per-entry checks see it.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from pathlib import Path
from types import TracebackType
from typing import Protocol

from trainops._errors import ArchiveError
from trainops.archive._limits import ArchiveLimits

__all__ = ["MAX_SINGLE_READ", "BoundedReader", "Readable", "open_decompressed"]

MAX_SINGLE_READ = 4 * 1024 * 1024
HEADER_ALLOWANCE = 3 * 512  # a header block, padding, and a small extended header per entry


class Readable(Protocol):
    """What :class:`BoundedReader` needs of a decompressed stream."""

    def read(self, size: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...
    def close(self) -> None: ...


def open_decompressed(path: Path) -> Readable:
    """``path`` opened for reading, decompressing gzip, bzip2 or xz as its first bytes say."""
    with path.open("rb") as probe:
        magic = probe.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(path, "rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(path, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(path, "rb")
    return path.open("rb")


class BoundedReader:
    """A seekable read-only view of ``raw`` that refuses to go past the archive's limits."""

    def __init__(self, raw: Readable, archive: str, limits: ArchiveLimits, size: int) -> None:
        self._raw = raw
        self._archive = archive
        allowance = HEADER_ALLOWANCE * (limits.max_members + 2)
        self._limit = limits.expansion_cap(size) + allowance + MAX_SINGLE_READ
        self.mode = "rb"

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > MAX_SINGLE_READ:
            raise ArchiveError(
                f"{self._archive}: rejected: a header or read of "
                f"{'unbounded' if size is None or size < 0 else f'{size:,} bytes'} "
                f"(at most {MAX_SINGLE_READ:,} at once)"
            )
        self._check(self._raw.tell() + size)
        return self._raw.read(size)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            self._check(offset)
        elif whence == os.SEEK_CUR:
            self._check(self._raw.tell() + offset)
        else:
            raise ArchiveError(f"{self._archive}: rejected: seeking from the end is not supported")
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> BoundedReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check(self, position: int) -> None:
        if position > self._limit:
            raise ArchiveError(
                f"{self._archive}: rejected: it decompresses to more than {self._limit:,} bytes "
                "(limits archive.max_total_bytes, archive.max_ratio)"
            )
