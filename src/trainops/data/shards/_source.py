"""Where a :class:`StreamingDataset` finds packed shards it can open at random: the contract.

A source knows the dataset's ``index.json`` and opens shard ``k`` (its position in the index)
as a :class:`ShardReader`, checked against what the index says of it. A source that has to
fetch shards (object storage) also hears which shards are needed next, so it can fetch them
ahead. Sources are pickled into DataLoader workers: anything bound to a process (a thread pool,
an open directory, a storage client) is made again where it is first used.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Sequence

from trainops.data._errors import CorruptRecordError
from trainops.data.shards._format import ShardReader
from trainops.data.shards._index import (
    INDEX_NAME,
    SHARD_FORMAT,
    DatasetIndexError,
    ShardIndex,
    ShardInfo,
)

__all__ = ["ShardSource", "map_shard", "parse_shard_index"]


class ShardSource(ABC):
    """A dataset of trainops shards: its index, and a way to open each shard."""

    index: ShardIndex
    location: str

    @abstractmethod
    def open(self, k: int) -> ShardReader:
        """Shard ``k`` of the index, ready to read (fetched first if need be)."""

    def prefetch(self, ks: Sequence[int]) -> None:  # noqa: B027 (a no-op unless overridden)
        """Shards ``ks`` will be opened soon, in that order."""

    def close(self) -> None:  # noqa: B027
        """Let go of anything held for this process."""

    def fingerprint(self) -> str:
        """A short digest of the index: the same data gives the same fingerprint."""
        digest = hashlib.sha256()
        for shard in self.index.shards:
            digest.update(f"{shard.name}\0{shard.records}\0{shard.sha256}\n".encode())
        return digest.hexdigest()[:16]


def parse_shard_index(text: bytes, source: str) -> ShardIndex:
    """The index of a dataset of trainops shards (not RecordIO or TFRecord ones)."""
    index = ShardIndex.parse(text, source=source)
    if index.format != SHARD_FORMAT:
        raise DatasetIndexError(
            f"{source}: format: {index.format!r} shards are not trainops shards; a "
            f"StreamingDataset reads {SHARD_FORMAT!r} (trainops pack --format shards)"
        )
    return index


def map_shard(fd: int, source: str, info: ShardInfo, *, verify: bool) -> ShardReader:
    """Map the open regular file ``fd`` as shard ``info`` and check it against the index."""
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        raise CorruptRecordError(source, 0, "not a regular file")
    if status.st_size != info.bytes:
        reason = f"{status.st_size} bytes, {INDEX_NAME} says {info.bytes}"
        raise CorruptRecordError(source, 0, reason)
    if status.st_size == 0:
        raise CorruptRecordError(source, 0, "empty file, not a shard")
    mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    try:
        reader = ShardReader(mapped, source=source, sha256=info.sha256 if verify else None)
    except BaseException:
        with contextlib.suppress(BufferError):  # the reader's view may outlive it a moment
            mapped.close()
        raise
    if len(reader) != info.records:
        reason = f"{len(reader)} records, {INDEX_NAME} says {info.records}"
        reader.close()
        raise CorruptRecordError(source, 16, reason)
    return reader
