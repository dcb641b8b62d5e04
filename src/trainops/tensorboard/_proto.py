"""TensorBoard's ``Event`` protobuf, encoded by hand for the events trainops writes.

The field numbers are those of tensorboard/compat/proto/event.proto and summary.proto::

    message Event   { double wall_time = 1; int64 step = 2;
                      oneof what { string file_version = 3; Summary summary = 5; ... } }
    message Summary { repeated Value value = 1; }
    message Value   { string tag = 1; oneof value { float simple_value = 2;
                      HistogramProto histo = 5; TensorProto tensor = 8; ... }
                      SummaryMetadata metadata = 9; }
    message HistogramProto { double min = 1; double max = 2; double num = 3; double sum = 4;
                      double sum_squares = 5; repeated double bucket_limit = 6 [packed];
                      repeated double bucket = 7 [packed]; }
    message SummaryMetadata { PluginData plugin_data = 1; }
    message PluginData { string plugin_name = 1; bytes content = 2; }

Encoded as protobuf's own serializer does (proto3: a field at its default is left out, fields in
number order; a oneof member is always written), so the bytes equal ``SerializeToString()``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Sequence

__all__ = [
    "FILE_VERSION",
    "double_field",
    "file_version_event",
    "histogram_event",
    "length_field",
    "packed_doubles",
    "plugin_event",
    "scalar_event",
    "scalar_series",
    "varint",
]

FILE_VERSION = "brain.Event:2"

_WALL_TIME = b"\x09"  # field 1, wire type 1 (64-bit)
_STEP = b"\x10"  # field 2, wire type 0 (varint)
_FILE_VERSION = b"\x1a"  # field 3, wire type 2 (length-delimited)
_SUMMARY = b"\x2a"  # field 5, length-delimited
_SUMMARY_VALUE = b"\x0a"  # Summary.value: field 1, length-delimited
_VALUE_TAG = b"\x0a"  # Value.tag: field 1, length-delimited
_SIMPLE_VALUE = b"\x15"  # Value.simple_value: field 2, wire type 5 (32-bit)
_HISTO = 5  # Value.histo
_TENSOR = 8  # Value.tensor
_METADATA = 9  # Value.metadata
_PLUGIN_DATA = 1  # SummaryMetadata.plugin_data
_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_ZERO = _DOUBLE.pack(0.0)
_FLOAT_MAX = 3.4028234663852886e38
_TAGS: dict[str, bytes] = {}  # tag -> its encoded Value.tag field (most logs reuse a few tags)
_MAX_CACHED_TAGS = 10_000


def varint(value: int) -> bytes:
    """A protobuf varint; a negative number as its 64-bit two's complement (int64)."""
    value &= 0xFFFFFFFFFFFFFFFF
    if value < 0x80:
        return bytes((value,))
    if value < 0x4000:  # the usual steps: two bytes, without the loop
        return bytes((value & 0x7F | 0x80, value >> 7))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, message, packed); empty: left out."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload if payload else b""


def double_field(number: int, value: float) -> bytes:
    """A ``double`` field; +0.0 (proto3's default) is left out, -0.0 is not."""
    packed = _DOUBLE.pack(value)
    return b"" if packed == _ZERO else varint(number << 3 | 1) + packed


def packed_doubles(number: int, values: Sequence[float]) -> bytes:
    """A packed ``repeated double`` field; empty: left out."""
    return length_field(number, struct.pack(f"<{len(values)}d", *values))


def _header(wall_time: float, step: int) -> bytes:
    head = _WALL_TIME + _DOUBLE.pack(wall_time) if wall_time != 0.0 else b""
    return head + _STEP + varint(step) if step else head


def _tag_field(tag: str) -> bytes:
    field = _TAGS.get(tag)
    if field is None:
        raw = tag.encode("utf-8")
        field = _VALUE_TAG + varint(len(raw)) + raw if raw else b""
        if len(_TAGS) < _MAX_CACHED_TAGS:
            _TAGS[tag] = field
    return field


def _float32(value: float) -> bytes:
    if abs(value) > _FLOAT_MAX and not math.isinf(value):
        value = math.copysign(math.inf, value)  # what a C float cast does with a double this big
    return _FLOAT.pack(value)


def _summary_event(summary_value: bytes, step: int, wall_time: float) -> bytes:
    summary = _SUMMARY_VALUE + varint(len(summary_value)) + summary_value
    return _header(wall_time, step) + _SUMMARY + varint(len(summary)) + summary


def scalar_event(tag: str, value: float, step: int, wall_time: float) -> bytes:
    """An ``Event`` with a one-value ``Summary``: ``tag`` = ``value`` (as float32) at ``step``."""
    return _summary_event(_tag_field(tag) + _SIMPLE_VALUE + _float32(value), step, wall_time)


def scalar_series(
    tag: str, values: Sequence[float], first_step: int, wall_time: float
) -> Iterator[bytes]:
    """:func:`scalar_event` for ``values`` at ``first_step``, ``first_step + 1``, ... (all at
    ``wall_time``): the same bytes, made from one template (the tag's fields are encoded once)."""
    if wall_time == 0.0:  # proto3 leaves the field out: the general encoder handles it
        for offset, value in enumerate(values):
            yield scalar_event(tag, value, first_step + offset, wall_time)
        return
    tag_field = _tag_field(tag)
    summary_value = _SUMMARY_VALUE + varint(len(tag_field) + 5) + tag_field
    tail = _SUMMARY + varint(len(summary_value) + 5) + summary_value + _SIMPLE_VALUE
    head = _WALL_TIME + _DOUBLE.pack(wall_time)
    stepped, plain = head + _STEP, head + tail  # step 0 is left out
    pack = _FLOAT.pack
    for step, value in enumerate(values, first_step):
        if abs(value) > _FLOAT_MAX:
            yield scalar_event(tag, value, step, wall_time)
        elif step:
            yield b"".join((stepped, varint(step), tail, pack(value)))
        else:
            yield plain + pack(value)


def histogram_event(tag: str, histogram: bytes, step: int, wall_time: float) -> bytes:
    """An ``Event`` whose ``Summary`` value is ``tag``'s encoded ``HistogramProto``."""
    value = _tag_field(tag) + varint(_HISTO << 3 | 2) + varint(len(histogram)) + histogram
    return _summary_event(value, step, wall_time)


def plugin_event(
    tag: str, plugin: str, content: bytes, tensor: bytes, step: int, wall_time: float
) -> bytes:
    """An ``Event`` whose value carries a plugin's data (``metadata.plugin_data``: the plugin's
    name and its serialized ``content``) and the encoded ``TensorProto`` ``tensor``."""
    plugin_data = length_field(1, plugin.encode()) + length_field(2, content)
    metadata = length_field(_PLUGIN_DATA, plugin_data)
    value = _tag_field(tag) + length_field(_TENSOR, tensor)
    value += varint(_METADATA << 3 | 2) + varint(len(metadata)) + metadata
    return _summary_event(value, step, wall_time)


def file_version_event(wall_time: float) -> bytes:
    """The first event of every file: ``file_version = "brain.Event:2"``."""
    raw = FILE_VERSION.encode()
    return _header(wall_time, 0) + _FILE_VERSION + varint(len(raw)) + raw
