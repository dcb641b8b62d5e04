"""Shards arriving one after another on a Pipe channel's FIFO.

A Pipe channel over a folder of trainops shards carries each object whole, in the agent's order:

- without record wrapping the stream is the shards back to back; each shard's 32-byte header
  says its size, so the reader finds where the next one starts (the channel must hold shards
  only: point it at them with a manifest, or use wrapping);
- with ``record_wrapping: RecordIO`` each object is one RecordIO record; records that are not
  shards (``index.json``, ``.lst`` files beside them) are skipped and counted.

A shard's claimed size is checked against ``max_shard_bytes`` before any of it is kept, and a
corrupt or truncated shard is an error naming the channel, the epoch and the byte offset in the
stream. A shard that is only passed over (a resumed epoch) is read but never parsed.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from trainops.data._errors import CorruptRecordError
from trainops.data.formats._recordio import RecordIOReader
from trainops.data.shards._format import SHARD_MAGIC, ShardReader

__all__ = ["StreamedShard", "stream_shards"]

_HEAD = struct.Struct("<8sIIQQ")
_log = logging.getLogger("trainops.data")


@dataclass(slots=True)
class StreamedShard:
    """A shard read off the stream: ``records`` of them, starting at byte ``offset``."""

    records: int
    offset: int
    data: bytes | bytearray
    label: str

    def reader(self) -> ShardReader:
        try:
            return ShardReader(self.data, source=self.label)
        except CorruptRecordError as error:
            raise CorruptRecordError(self.label, self.offset + error.offset, error.reason) from None


def stream_shards(
    stream: BinaryIO, *, label: str, wrapped: bool, max_shard_bytes: int
) -> Iterator[StreamedShard]:
    """The shards of one epoch's stream, in order."""
    if wrapped:
        return _wrapped(stream, label, max_shard_bytes)
    return _raw(stream, label, max_shard_bytes)


def _raw(stream: BinaryIO, label: str, limit: int) -> Iterator[StreamedShard]:
    offset = 0
    head = bytearray(_HEAD.size)
    while got := _fill(stream, memoryview(head)):
        if got < _HEAD.size:
            raise CorruptRecordError(label, offset, f"truncated: {got} bytes of a header")
        records, size = _check_head(bytes(head), label, offset, limit)
        data = bytearray(size)
        data[: _HEAD.size] = head
        got = _HEAD.size + _fill(stream, memoryview(data)[_HEAD.size :])
        if got < size:
            reason = f"truncated: the shard's header says {size} bytes, {got} came"
            raise CorruptRecordError(label, offset, reason)
        yield StreamedShard(records, offset, data, label)
        offset += size


def _check_head(head: bytes, label: str, offset: int, limit: int) -> tuple[int, int]:
    magic, _, _, records, size = _HEAD.unpack(head)
    if magic != SHARD_MAGIC:
        raise CorruptRecordError(
            label,
            offset,
            f"not a trainops shard (starts {head[:8]!r}); a Pipe channel without record "
            "wrapping must hold shards only (use record_wrapping: RecordIO to skip other files)",
        )
    if not _HEAD.size < size <= limit:
        reason = f"a shard of {size} bytes is outside 33..{limit} (max_shard_bytes)"
        raise CorruptRecordError(label, offset, reason)
    return records, size


def _fill(stream: BinaryIO, view: memoryview) -> int:
    """Read into all of ``view``; fewer bytes only at the end of the stream."""
    got = 0
    with view:
        while got < len(view):
            count = stream.readinto(view[got:])  # type: ignore[attr-defined]
            if not count:
                break
            got += count
    return got


def _wrapped(stream: BinaryIO, label: str, limit: int) -> Iterator[StreamedShard]:
    reader = RecordIOReader(stream, source=label, max_record_bytes=limit, block_size=4 << 20)
    skipped = found = 0
    for offset, payload in reader.records():
        if payload[:8] != SHARD_MAGIC or len(payload) < _HEAD.size:
            skipped += 1
            continue
        found += 1
        yield StreamedShard(_HEAD.unpack_from(payload)[3], offset + 8, payload, label)
    if skipped:
        _log.info("%s: skipped %d object(s) that are not shards", label, skipped)
    if skipped and not found:
        raise CorruptRecordError(label, 0, f"none of its {skipped} object(s) is a trainops shard")
