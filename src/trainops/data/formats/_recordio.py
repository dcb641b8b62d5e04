"""MXNet / dmlc RecordIO: framing, a block-reading streaming reader, IRHeader and ``.idx``.

The byte format (dmlc-core ``recordio.h``), little-endian 32-bit words::

    u32 magic = 0xced7230a
    u32 lrec  = cflag << 29 | length        length < 2**29
    byte data[length]
    byte pad[-length % 4]                   zeros, so every header is 4-byte aligned

``cflag`` 0 is a whole record. A payload holding the magic at a 4-byte aligned offset is split
there into parts (cflag 1 first, 2 middle, 3 last) and those 4 bytes are dropped; the reader puts
them back between parts. So no aligned magic ever appears inside data, and a reader that lost
its place finds the next record by scanning for one.

An MXNet image record starts its payload with an ``IRHeader`` (``<IfQQ``: flag, label, id,
id2) followed by ``flag`` float32 labels when ``flag > 0``. A ``.idx`` file beside a ``.rec``
holds ``index<TAB>offset`` lines for random access.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import BinaryIO, NamedTuple, TextIO

from trainops.data._errors import CorruptBudget, CorruptRecordError
from trainops.data.formats._blocks import BlockStream

__all__ = [
    "RECORDIO_MAGIC",
    "IRHeader",
    "RecordIOReader",
    "RecordIOWriter",
    "pack_irheader",
    "read_idx",
    "recordio_frame",
    "recordio_header",
    "recordio_padding",
    "unpack_irheader",
    "write_idx",
]

RECORDIO_MAGIC = 0xCED7230A
_MAGIC = struct.pack("<I", RECORDIO_MAGIC)
_HEADER = struct.Struct("<II")
_LENGTH_MASK = (1 << 29) - 1
_IRHEADER = struct.Struct("<IfQQ")
_IDX_LINE_MAX = 64  # two 20-digit numbers, a tab and a newline fit


def recordio_header(length: int, cflag: int = 0) -> bytes:
    """The 8 header bytes of one part of ``length`` bytes."""
    if not 0 <= length <= _LENGTH_MASK:
        raise ValueError(f"a RecordIO part holds at most {_LENGTH_MASK} bytes, not {length}")
    return _HEADER.pack(RECORDIO_MAGIC, cflag << 29 | length)


def recordio_padding(length: int) -> bytes:
    """The zero bytes that follow a part of ``length`` bytes."""
    return b"\0" * (-length % 4)


def _aligned_magics(payload: bytes) -> list[int]:
    found = []
    at = payload.find(_MAGIC)
    while at != -1:
        if at % 4 == 0:
            found.append(at)
        at = payload.find(_MAGIC, at + 1)
    return found


def recordio_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """One complete record around ``payload``, split at aligned magics as dmlc does."""
    data = bytes(payload)
    cuts = _aligned_magics(data)
    if not cuts:
        return recordio_header(len(data)) + data + recordio_padding(len(data))
    bounds = [0, *(cut + 4 for cut in cuts)]
    ends = [*cuts, len(data)]
    out = []
    for number, (start, end) in enumerate(zip(bounds, ends, strict=True)):
        cflag = 1 if number == 0 else 3 if number == len(cuts) else 2
        out += [recordio_header(end - start, cflag), data[start:end], recordio_padding(end - start)]
    return b"".join(out)


class RecordIOWriter:
    """Frames records into a binary stream; :meth:`write` returns each record's offset."""

    def __init__(self, stream: BinaryIO, offset: int = 0) -> None:
        self._stream = stream
        self.offset = offset

    def write(self, payload: bytes | bytearray | memoryview) -> int:
        start = self.offset
        frame = recordio_frame(payload)
        self._stream.write(frame)
        self.offset += len(frame)
        return start


class _Bad(Exception):
    """A corrupt record at ``offset``; reading goes on by scanning from ``resume``."""

    def __init__(self, offset: int, reason: str, resume: int) -> None:
        super().__init__(reason)
        self.offset, self.reason, self.resume = offset, reason, resume


class RecordIOReader:
    """Iterates over the payloads of a RecordIO stream, reading it in large blocks.

    ``source`` names the stream in errors (a path, or ``channel train, epoch 2``). A corrupt
    record raises :class:`CorruptRecordError`, or is skipped (up to ``max_corrupt`` of them)
    by scanning to the next aligned magic. ``max_record_bytes`` bounds what one record may
    claim before any of it is kept in memory.
    """

    def __init__(
        self,
        stream: BinaryIO,
        *,
        source: str = "<stream>",
        max_corrupt: int = 0,
        block_size: int = 1 << 20,
        max_record_bytes: int = 1 << 30,
    ) -> None:
        self._in = BlockStream(stream, block_size)
        self._budget = CorruptBudget(source, max_corrupt)
        self._max = max_record_bytes

    @property
    def skipped(self) -> int:
        """How many corrupt records were skipped so far."""
        return self._budget.skipped

    def __iter__(self) -> Iterator[bytes]:
        for _, payload in self.records():
            yield payload

    def records(self) -> Iterator[tuple[int, bytes]]:
        """``(offset, payload)`` for every record, ``offset`` that of its first header."""
        try:
            while self._in.fill(1):
                start = self._in.offset
                try:
                    yield start, self._record(start)
                except _Bad as bad:
                    self._budget.spend(bad.offset, bad.reason)
                    self._resync(bad.resume)
        finally:
            self._budget.report()

    def _header(self, at: int, parts: int) -> tuple[int, int]:
        if not self._in.fill(8):
            left = self._in.available
            raise _Bad(at, f"truncated: {left} byte(s) where an 8-byte header belongs", at + 4)
        magic, lrec = _HEADER.unpack_from(self._in.data, self._in.pos)
        if magic != RECORDIO_MAGIC:
            raise _Bad(at, f"bad magic 0x{magic:08x} (expected 0x{RECORDIO_MAGIC:08x})", at + 4)
        cflag, length = lrec >> 29, lrec & _LENGTH_MASK
        if cflag > 3:
            raise _Bad(at, f"bad continuation flag {cflag}", at + 4)
        if parts == 0 and cflag >= 2:
            raise _Bad(at, f"continuation part (cflag {cflag}) without a first part", at + 4)
        return cflag, length

    def _record(self, start: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            at = self._in.offset
            cflag, length = self._header(at, len(parts))
            if parts and cflag <= 1:
                raise _Bad(start, "multi-part record cut short by a new record", at)
            total += length
            if total > self._max:
                raise _Bad(at, f"record of {total} bytes exceeds max_record_bytes", at + 4)
            padded = length + (-length % 4)
            if not self._in.fill(8 + padded):
                left = self._in.available - 8
                raise _Bad(at, f"truncated: part of {length} bytes, {left} remain", at + 4)
            body = self._in.pos + 8
            parts.append(self._in.data[body : body + length])
            self._in.pos = body + padded
            if cflag in (0, 3):
                return parts[0] if len(parts) == 1 else _MAGIC.join(parts)

    def _resync(self, resume: int) -> None:
        """Move to the first 4-byte aligned magic at or after ``resume`` (or to the end)."""
        blocks = self._in
        blocks.seek_forward(resume)
        while blocks.fill(4):
            at = blocks.data.find(_MAGIC, blocks.pos)
            while at != -1 and (blocks.base + at) % 4:
                at = blocks.data.find(_MAGIC, at + 1)
            if at != -1:
                blocks.pos = at
                return
            blocks.pos = len(blocks.data) - 3
        blocks.pos = len(blocks.data)


class IRHeader(NamedTuple):
    """MXNet's image record header: ``flag`` is the number of extra float labels."""

    flag: int
    label: float | tuple[float, ...]
    id: int
    id2: int


def pack_irheader(header: IRHeader, data: bytes) -> bytes:
    """``IRHeader`` + labels + ``data``, as ``mxnet.recordio.pack`` writes them."""
    if isinstance(header.label, tuple):
        labels = header.label
        head = _IRHEADER.pack(len(labels), 0.0, header.id, header.id2)
        return head + struct.pack(f"<{len(labels)}f", *labels) + data
    return _IRHEADER.pack(0, header.label, header.id, header.id2) + data


def unpack_irheader(
    payload: bytes, *, source: str = "<record>", offset: int = 0
) -> tuple[IRHeader, bytes]:
    """Split a payload into its ``IRHeader`` (labels read) and the data after it."""
    if len(payload) < _IRHEADER.size:
        reason = f"{len(payload)} bytes is too short for a 24-byte IRHeader"
        raise CorruptRecordError(source, offset, reason)
    flag, label, id_, id2 = _IRHEADER.unpack_from(payload)
    if flag == 0:
        return IRHeader(0, label, id_, id2), payload[_IRHEADER.size :]
    end = _IRHEADER.size + 4 * flag
    if end > len(payload):
        reason = f"IRHeader claims {flag} labels, the record holds {len(payload)} bytes"
        raise CorruptRecordError(source, offset, reason)
    labels = struct.unpack_from(f"<{flag}f", payload, _IRHEADER.size)
    return IRHeader(flag, labels, id_, id2), payload[end:]


def write_idx(stream: TextIO, entries: Iterable[tuple[int, int]]) -> None:
    """Write ``index<TAB>offset`` lines."""
    stream.writelines(f"{index}\t{offset}\n" for index, offset in entries)


def read_idx(stream: BinaryIO, *, source: str = "<idx>") -> list[tuple[int, int]]:
    """Read ``index<TAB>offset`` lines; a bad line is an error naming its byte offset."""
    entries: list[tuple[int, int]] = []
    at = 0
    while line := stream.readline(_IDX_LINE_MAX):
        if len(line) == _IDX_LINE_MAX and not line.endswith(b"\n"):
            raise CorruptRecordError(source, at, f"line {len(entries) + 1} is too long")
        fields = line.split(b"\t")
        try:
            index, offset = (int(field) for field in fields)
        except ValueError:
            number = len(entries) + 1
            reason = f"line {number} is not 'index<TAB>offset': {line[:40].rstrip()!r}"
            raise CorruptRecordError(source, at, reason) from None
        if index < 0 or offset < 0:
            raise CorruptRecordError(source, at, f"line {len(entries) + 1} has a negative number")
        entries.append((index, offset))
        at += len(line)
    return entries
