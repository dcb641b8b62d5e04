"""Reading one TFRecord of an event file at a known offset, every length and CRC checked.

The framing is TFRecord's (``trainops.data``'s :func:`~trainops.data.tfrecord_frame`); smdebug
writes the data CRC of the constant ``b"0x12345678"`` instead of the payload's unless asked for
checksums, so a data CRC matching either is accepted. The length CRC is always checked.
"""

from __future__ import annotations

import struct

from trainops.data import masked_crc32c
from trainops.debugger.exceptions import DebugFormatError

__all__ = ["SMDEBUG_NO_CHECKSUM_CRC", "read_record", "records"]

_HEAD = struct.Struct("<QI")
_CRC = struct.Struct("<I")
SMDEBUG_NO_CHECKSUM_CRC = masked_crc32c(b"0x12345678")


def read_record(
    data: bytes | memoryview, start: int, source: str, end: int | None = None
) -> memoryview:
    """The payload of the record at ``data[start:]`` (which must end by ``end``)."""
    view = memoryview(data)
    end = len(view) if end is None else min(end, len(view))
    if start < 0 or start + 16 > end:
        raise DebugFormatError(f"{source}: byte {start}: no complete record there")
    length, crc = _HEAD.unpack_from(view, start)
    if crc != masked_crc32c(view[start : start + 8]):
        raise DebugFormatError(f"{source}: byte {start}: record length CRC mismatch")
    if length > end - start - 16:
        raise DebugFormatError(f"{source}: byte {start}: record of {length} bytes is cut short")
    payload = view[start + 12 : start + 12 + length]
    (data_crc,) = _CRC.unpack_from(view, start + 12 + length)
    if data_crc != SMDEBUG_NO_CHECKSUM_CRC and data_crc != masked_crc32c(payload):
        raise DebugFormatError(f"{source}: byte {start}: record data CRC mismatch")
    return payload


def records(data: bytes | memoryview, source: str) -> list[tuple[int, memoryview]]:
    """Every ``(offset, payload)`` of a whole event file."""
    out: list[tuple[int, memoryview]] = []
    pos = 0
    while pos < len(data):
        payload = read_record(data, pos, source)
        out.append((pos, payload))
        pos += 16 + len(payload)
    return out
