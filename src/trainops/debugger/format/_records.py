"""Reading one TFRecord of an event file at a known offset, every length and CRC checked.

The framing is TFRecord's (``trainops.data``'s :func:`~trainops.data.tfrecord_frame`); smdebug
writes the data CRC of the constant ``b"0x12345678"`` instead of the payload's unless asked for
checksums (and its reader insists on that constant), so :func:`frame_record` writes it the same
way by default and a data CRC matching either is accepted here. The length CRC is always
checked; a payload is decoded with every length bounded, so a corrupt one is an error, not a
crash.
"""

from __future__ import annotations

import struct

from trainops.data import masked_crc32c, tfrecord_frame
from trainops.debugger.exceptions import DebugFormatError

__all__ = [
    "SMDEBUG_NO_CHECKSUM_CRC",
    "frame_record",
    "read_record",
    "record_footer",
    "record_header",
    "records",
]

_HEAD = struct.Struct("<QI")
_CRC = struct.Struct("<I")
SMDEBUG_NO_CHECKSUM_CRC = masked_crc32c(b"0x12345678")
_NO_CHECKSUM = _CRC.pack(SMDEBUG_NO_CHECKSUM_CRC)


def frame_record(payload: bytes, *, write_checksum: bool = False) -> bytes:
    """One TFRecord around ``payload``: with the payload's CRC, or smdebug's constant one."""
    if write_checksum:
        return tfrecord_frame(payload)
    return b"".join([record_header(len(payload)), payload, _NO_CHECKSUM])


def record_header(length: int) -> bytes:
    """The 12 bytes before a payload of ``length`` bytes."""
    raw = struct.pack("<Q", length)
    return raw + _CRC.pack(masked_crc32c(raw))


def record_footer(parts: tuple[bytes, memoryview] | None = None) -> bytes:
    """The 4 bytes after a payload: the CRC of ``parts`` (joined), or smdebug's constant."""
    if parts is None:
        return _NO_CHECKSUM
    return _CRC.pack(masked_crc32c(parts[0] + bytes(parts[1])))


def read_record(
    data: bytes | memoryview, start: int, source: str, end: int | None = None, *, base: int = 0
) -> memoryview:
    """The payload of the record at ``data[start:]`` (which must end by ``end``); ``data`` is
    the part of ``source`` from byte ``base`` on (errors name the byte in the whole file)."""
    view = memoryview(data)
    end = len(view) if end is None else min(end, len(view))
    where = f"{source}: byte {base + start}"
    if start < 0 or start + 16 > end:
        raise DebugFormatError(f"{where}: no complete record there")
    length, crc = _HEAD.unpack_from(view, start)
    if crc != masked_crc32c(view[start : start + 8]):
        raise DebugFormatError(f"{where}: record length CRC mismatch")
    if length > end - start - 16:
        raise DebugFormatError(f"{where}: record of {length} bytes is cut short")
    payload = view[start + 12 : start + 12 + length]
    (data_crc,) = _CRC.unpack_from(view, start + 12 + length)
    if data_crc != SMDEBUG_NO_CHECKSUM_CRC and data_crc != masked_crc32c(payload):
        raise DebugFormatError(f"{where}: record data CRC mismatch")
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
