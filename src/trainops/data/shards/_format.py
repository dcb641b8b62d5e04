"""trainops' shard format: many records in one file, any contiguous run one memoryview slice.

Layout of a shard, all integers little-endian unsigned::

    offset        size       field
    0             8          magic b"TOPSHRD\\x00"
    8             4          u32 version, 1
    12            4          u32 flags, 0 (reserved; a reader refuses anything else)
    16            8          u64 n, the number of records
    24            8          u64 size, the whole file's length in bytes
    32            8 * (n+1)  u64 offsets[n+1]: offsets[i] is where record i starts, counted
                             from the start of the file; offsets[n] == size
    32 + 8(n+1)   ...        the records' bytes, back to back, no padding

So record i is ``file[offsets[i]:offsets[i+1]]`` and records ``[i:j]`` are the single slice
``file[offsets[i]:offsets[j]]``: a reader hands a block of records across a process boundary
as one byte string plus ``j - i + 1`` offsets, never one sample at a time. ``offsets[0]`` is
``32 + 8(n+1)`` and the offsets never decrease; the reader checks all of it (and the file's
sha256 when asked) before it returns a byte, and names the file and byte offset of the first
thing wrong. Records are opaque bytes; what they hold is the writer's business (``trainops
pack`` writes an IRHeader and the file's bytes, see ``trainops.data.packer``).
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from trainops.data._errors import CorruptRecordError
from trainops.data.shards._index import ShardInfo

__all__ = ["SHARD_MAGIC", "RecordBlock", "ShardReader", "encode_shard", "write_shard"]

SHARD_MAGIC = b"TOPSHRD\x00"
SHARD_VERSION = 1
_HEAD = struct.Struct("<8sIIQQ")

Bytes = bytes | bytearray | memoryview


def encode_shard(records: Sequence[Bytes]) -> bytes:
    """The bytes of one shard holding ``records`` in order."""
    start = _HEAD.size + 8 * (len(records) + 1)
    offsets = [start]
    for record in records:
        offsets.append(offsets[-1] + len(record))
    head = _HEAD.pack(SHARD_MAGIC, SHARD_VERSION, 0, len(records), offsets[-1])
    return b"".join([head, struct.pack(f"<{len(offsets)}Q", *offsets), *records])


def write_shard(path: Path, records: Sequence[Bytes]) -> ShardInfo:
    """Write a shard atomically (temporary name, fsync, rename) and describe it."""
    data = encode_shard(records)
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.part")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return ShardInfo(path.name, len(records), len(data), hashlib.sha256(data).hexdigest())


class RecordBlock:
    """Records ``[i:j]`` of a shard: ``data`` is their bytes, ``bounds`` their ``j-i+1``
    offsets (absolute in the shard). Pickles as one byte string and the offsets."""

    def __init__(self, data: memoryview, bounds: Sequence[int]) -> None:
        self.data = data
        self.bounds = bounds

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, k: int) -> memoryview:
        if not -len(self) <= k < len(self):
            raise IndexError(f"record {k} of a block of {len(self)}")
        k %= len(self)
        base = self.bounds[0]
        return self.data[self.bounds[k] - base : self.bounds[k + 1] - base]

    def __iter__(self) -> Iterator[memoryview]:
        return (self[k] for k in range(len(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_block, (bytes(self.data), list(self.bounds)))


def _rebuild_block(data: bytes, bounds: list[int]) -> RecordBlock:
    return RecordBlock(memoryview(data), bounds)


def _offset_table(view: memoryview, n: int) -> Sequence[int]:
    table = view[_HEAD.size : _HEAD.size + 8 * (n + 1)]
    if sys.byteorder == "little":
        return table.cast("Q")
    swapped = array("Q", table.tobytes())
    swapped.byteswap()
    return swapped


class ShardReader:
    """Reads one shard from a path (memory-mapped) or from bytes already fetched."""

    def __init__(self, buffer: Bytes | mmap.mmap, *, source: str, sha256: str | None = None):
        self.source = source
        self._map = buffer if isinstance(buffer, mmap.mmap) else None
        self._view = memoryview(buffer)
        if sha256 is not None:
            self._verify(sha256)
        self._offsets = self._check()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, sha256: str | None = None) -> ShardReader:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise CorruptRecordError(os.fspath(path), 0, "empty file, not a shard")
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        return cls(mapped, source=os.fspath(path), sha256=sha256)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def record(self, i: int) -> memoryview:
        return self.block(i, i + 1)[0]

    def block(self, i: int, j: int) -> RecordBlock:
        """Records ``[i:j]`` as one slice of the shard."""
        if not 0 <= i <= j <= len(self):
            raise IndexError(f"{self.source}: records [{i}:{j}] of {len(self)}")
        bounds = self._offsets[i : j + 1]
        return RecordBlock(self._view[bounds[0] : bounds[-1]], bounds)

    def __iter__(self) -> Iterator[memoryview]:
        return iter(self.block(0, len(self)))

    def close(self) -> None:
        """Release the mapping; slices still held keep it alive until they are dropped."""
        self._offsets = ()
        self._view.release()
        if self._map is not None:
            # A RecordBlock may still export it; then the mapping goes with the last one.
            with contextlib.suppress(BufferError):
                self._map.close()

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _verify(self, expected: str) -> None:
        actual = hashlib.sha256(self._view).hexdigest()
        if actual != expected:
            reason = f"sha256 is {actual}, the index says {expected}"
            raise CorruptRecordError(self.source, 0, reason)

    def _bad(self, offset: int, reason: str) -> CorruptRecordError:
        return CorruptRecordError(self.source, offset, reason)

    def _check(self) -> Sequence[int]:
        size = len(self._view)
        if size < _HEAD.size:
            raise self._bad(0, f"truncated: {size} bytes, a shard header is {_HEAD.size}")
        magic, version, flags, n, stated = _HEAD.unpack_from(self._view)
        if magic != SHARD_MAGIC:
            raise self._bad(0, f"not a trainops shard (magic {magic!r})")
        if version != SHARD_VERSION or flags != 0:
            raise self._bad(8, f"unsupported shard version {version} flags {flags}")
        if stated != size:
            raise self._bad(24, f"header says {stated} bytes, the file has {size} (truncated?)")
        if n > (size - _HEAD.size) // 8 - 1:
            raise self._bad(16, f"{n} records cannot fit a table in {size} bytes")
        offsets = _offset_table(self._view, n)
        self._check_offsets(offsets, size)
        return offsets

    def _check_offsets(self, offsets: Sequence[int], size: int) -> None:
        start = _HEAD.size + 8 * len(offsets)
        if offsets[0] != start:
            raise self._bad(_HEAD.size, f"record 0 starts at {offsets[0]}, not {start}")
        if offsets[-1] != size:
            where = _HEAD.size + 8 * (len(offsets) - 1)
            raise self._bad(where, f"records end at {offsets[-1]}, the file at {size}")
        if not all(map(int.__le__, offsets[:-1], offsets[1:])):
            k = next(k for k in range(1, len(offsets)) if offsets[k] < offsets[k - 1])
            raise self._bad(_HEAD.size + 8 * k, f"offset of record {k} goes backwards")
