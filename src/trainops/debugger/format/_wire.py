"""The protobuf wire format, by hand: just enough to encode and decode the debugger's events.

Encoding writes fields as protobuf's serializer does (tag varint, then a varint, a fixed
64-bit value or a length-delimited body). Decoding walks a message's fields with every length
checked against the bytes that remain: a hostile length cannot make it read past the message
or allocate more than it holds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

__all__ = [
    "WireError",
    "double_field",
    "fields",
    "len_field",
    "len_head",
    "read_varint",
    "varint",
    "varint_field",
]

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_DOUBLE = struct.Struct("<d")


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message; ``offset`` is where it went wrong."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(f"byte {offset}: {reason}")
        self.offset, self.reason = offset, reason


_SMALL = [bytes((n,)) for n in range(0x80)]


def varint(value: int) -> bytes:
    """``value`` as a varint (a negative int64 as its 64-bit two's complement)."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_field(number: int, value: int) -> bytes:
    return varint(number << 3 | _VARINT) + varint(value)


def double_field(number: int, value: float) -> bytes:
    return varint(number << 3 | _FIXED64) + _DOUBLE.pack(value)


def len_field(number: int, body: bytes) -> bytes:
    return varint(number << 3 | _LEN) + varint(len(body)) + body


def len_head(number: int, length: int) -> bytes:
    """The tag and length of a length-delimited field whose body (``length`` bytes) follows."""
    return varint(number << 3 | _LEN) + varint(length)


def read_varint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``data[pos]`` (not past ``end``) and the offset after it."""
    value = shift = 0
    start = pos
    while pos < end:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise WireError(start, "varint longer than 10 bytes")
    raise WireError(start, "truncated varint")


def fields(
    data: bytes | memoryview, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, int, int | memoryview]]:
    """``(field number, wire type, offset, value)`` for each field of ``data[start:end]``.

    A varint is an ``int``, a fixed value its raw bits as an ``int``, a length-delimited field
    a ``memoryview`` of its body (no copy).
    """
    view = memoryview(data)
    end = len(view) if end is None else end
    pos = start
    while pos < end:
        at = pos
        key, pos = read_varint(view, pos, end)
        number, kind = key >> 3, key & 7
        if number == 0:
            raise WireError(at, "field number 0")
        value: int | memoryview
        if kind == _VARINT:
            value, pos = read_varint(view, pos, end)
        elif kind in (_FIXED64, _FIXED32):
            width = 8 if kind == _FIXED64 else 4
            if pos + width > end:
                raise WireError(at, "truncated fixed-width field")
            value = int.from_bytes(view[pos : pos + width], "little")
            pos += width
        elif kind == _LEN:
            length, pos = read_varint(view, pos, end)
            if length > end - pos:
                raise WireError(at, f"field of {length} bytes runs past the message's end")
            value = view[pos : pos + length]
            pos += length
        else:
            raise WireError(at, f"unsupported wire type {kind}")
        yield number, kind, at, value
