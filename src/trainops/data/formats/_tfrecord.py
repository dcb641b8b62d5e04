"""TFRecord: framing with masked CRC32C, a writer, and a block-reading reader.

The byte format (TensorFlow's ``record_writer.cc``), little-endian::

    u64  length
    u32  masked_crc32c(the 8 length bytes)
    byte data[length]
    u32  masked_crc32c(data)

    masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8   (mod 2**32)

Records are back to back, so concatenated files are one valid stream. The reader checks both
CRCs (``verify="all"``), only the length's (``"length"``: a corrupt length is what would send
the reader astray) or neither (``"none"``). A corrupt record is an error naming the source and
its byte offset; with ``max_corrupt`` it is skipped by scanning forward, byte by byte, for the
next header whose length CRC holds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO, Literal

from trainops.data._errors import CorruptBudget
from trainops.data.formats._blocks import BlockStream

__all__ = [
    "TFRecordReader",
    "TFRecordWriter",
    "Verify",
    "crc32c_python",
    "masked_crc32c",
    "tfrecord_frame",
]

Verify = Literal["all", "length", "none"]
_VERIFY = ("all", "length", "none")
_HEAD = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # Castagnoli, reflected
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c_python(data: bytes) -> int:
    """CRC32C in Python, a byte at a time (some ten MB/s): where ``google_crc32c`` is not
    installed, as in a job's own interpreter that the debugger hook writes from."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:
    from google_crc32c import value as _crc32c
except ImportError:  # pragma: no cover - trainops' own environment has it
    _crc32c = crc32c_python


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """TFRecord's masked CRC32C of ``data``."""
    crc: int = _crc32c(data if isinstance(data, bytes) else bytes(data))
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def tfrecord_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """One complete TFRecord around ``payload``."""
    size = len(payload)
    head = _HEADS.get(size)
    if head is None:
        length = struct.pack("<Q", size)
        head = length + _CRC.pack(masked_crc32c(length))
        if size < _CACHED_HEADS:
            _HEADS[size] = head
    return b"".join((head, payload, _CRC.pack(masked_crc32c(payload))))


# A small record's length and its CRC, by length: many records (TensorBoard's scalars) have the
# same few lengths, and this halves the CRCs their framing computes.
_CACHED_HEADS = 4096
_HEADS: dict[int, bytes] = {}


class TFRecordWriter:
    """Frames records into a binary stream; :meth:`write` returns each record's offset."""

    def __init__(self, stream: BinaryIO, offset: int = 0) -> None:
        self._stream = stream
        self.offset = offset

    def write(self, payload: bytes | bytearray | memoryview) -> int:
        start = self.offset
        frame = tfrecord_frame(payload)
        self._stream.write(frame)
        self.offset += len(frame)
        return start


class _Bad(Exception):
    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset, self.reason = offset, reason


class TFRecordReader:
    """Iterates over the payloads of a TFRecord stream, reading it in large blocks.

    ``source`` names the stream in errors; ``verify`` picks the CRCs checked;
    ``max_record_bytes`` bounds what a length field may claim.
    """

    def __init__(
        self,
        stream: BinaryIO,
        *,
        source: str = "<stream>",
        verify: Verify = "all",
        max_corrupt: int = 0,
        block_size: int = 1 << 20,
        max_record_bytes: int = 1 << 30,
    ) -> None:
        if verify not in _VERIFY:
            raise ValueError(f"verify must be one of {_VERIFY}, not {verify!r}")
        self._in = BlockStream(stream, block_size)
        self._verify = verify
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
        """``(offset, payload)`` for every record."""
        try:
            while self._in.fill(1):
                start = self._in.offset
                try:
                    yield start, self._record(start)
                except _Bad as bad:
                    self._budget.spend(bad.offset, bad.reason)
                    self._resync(start + 1)
        finally:
            self._budget.report()

    def _length(self, at: int) -> int:
        blocks = self._in
        if not blocks.fill(12):
            raise _Bad(at, f"truncated: {blocks.available} byte(s) where a 12-byte header belongs")
        length, crc = _HEAD.unpack_from(blocks.data, blocks.pos)
        if self._verify != "none" and crc != masked_crc32c(
            blocks.data[blocks.pos : blocks.pos + 8]
        ):
            raise _Bad(at, "length CRC mismatch")
        if length > self._max:
            raise _Bad(at, f"record of {length} bytes exceeds max_record_bytes")
        return int(length)

    def _record(self, at: int) -> bytes:
        length = self._length(at)
        blocks = self._in
        if not blocks.fill(16 + length):
            left = blocks.available - 12
            raise _Bad(at, f"truncated: record of {length} bytes, {left} remain with its CRC")
        body = blocks.pos + 12
        payload = blocks.data[body : body + length]
        if self._verify == "all":
            (crc,) = _CRC.unpack_from(blocks.data, body + length)
            if crc != masked_crc32c(payload):
                raise _Bad(at, "data CRC mismatch")
        blocks.pos = body + length + 4
        return payload

    def _resync(self, resume: int) -> None:
        """Move to the first offset at or after ``resume`` whose 12 bytes are a header."""
        blocks = self._in
        blocks.seek_forward(resume)
        while blocks.fill(12):
            at = blocks.pos
            if _CRC.unpack_from(blocks.data, at + 8)[0] == masked_crc32c(blocks.data[at : at + 8]):
                return
            blocks.pos += 1
        blocks.pos = len(blocks.data)
