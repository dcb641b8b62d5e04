"""TensorBoard's ``Event`` protobuf, encoded by hand for the two events a scalar log needs.

The field numbers are those of tensorboard/compat/proto/event.proto and summary.proto::

    message Event   { double wall_time = 1; int64 step = 2;
                      oneof what { string file_version = 3; Summary summary = 5; ... } }
    message Summary { repeated Value value = 1; }
    message Value   { string tag = 1; oneof value { float simple_value = 2; ... } }

Encoded as protobuf's own serializer does (proto3: ``wall_time`` and ``step`` are left out when
zero; a oneof member is always written), so the bytes equal ``Event.SerializeToString()``.
"""

from __future__ import annotations

import math
import struct

__all__ = ["FILE_VERSION", "file_version_event", "scalar_event"]

FILE_VERSION = "brain.Event:2"

_WALL_TIME = b"\x09"  # field 1, wire type 1 (64-bit)
_STEP = b"\x10"  # field 2, wire type 0 (varint)
_FILE_VERSION = b"\x1a"  # field 3, wire type 2 (length-delimited)
_SUMMARY = b"\x2a"  # field 5, length-delimited
_SUMMARY_VALUE = b"\x0a"  # Summary.value: field 1, length-delimited
_VALUE_TAG = b"\x0a"  # Value.tag: field 1, length-delimited
_SIMPLE_VALUE = b"\x15"  # Value.simple_value: field 2, wire type 5 (32-bit)
_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_FLOAT_MAX = 3.4028234663852886e38
_TAGS: dict[str, bytes] = {}  # tag -> its encoded Value.tag field (most logs reuse a few tags)
_MAX_CACHED_TAGS = 10_000


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # int64: a negative number is its 64-bit two's complement
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _header(wall_time: float, step: int) -> bytes:
    head = _WALL_TIME + _DOUBLE.pack(wall_time) if wall_time != 0.0 else b""
    return head + _STEP + _varint(step) if step else head


def _tag_field(tag: str) -> bytes:
    field = _TAGS.get(tag)
    if field is None:
        raw = tag.encode("utf-8")
        field = _VALUE_TAG + _varint(len(raw)) + raw if raw else b""
        if len(_TAGS) < _MAX_CACHED_TAGS:
            _TAGS[tag] = field
    return field


def _float32(value: float) -> bytes:
    if abs(value) > _FLOAT_MAX and not math.isinf(value):
        value = math.copysign(math.inf, value)  # what a C float cast does with a double this big
    return _FLOAT.pack(value)


def scalar_event(tag: str, value: float, step: int, wall_time: float) -> bytes:
    """An ``Event`` with a one-value ``Summary``: ``tag`` = ``value`` (as float32) at ``step``."""
    summary_value = _tag_field(tag) + _SIMPLE_VALUE + _float32(value)
    summary = _SUMMARY_VALUE + _varint(len(summary_value)) + summary_value
    return _header(wall_time, step) + _SUMMARY + _varint(len(summary)) + summary


def file_version_event(wall_time: float) -> bytes:
    """The first event of every file: ``file_version = "brain.Event:2"``."""
    raw = FILE_VERSION.encode()
    return _header(wall_time, 0) + _FILE_VERSION + _varint(len(raw)) + raw
