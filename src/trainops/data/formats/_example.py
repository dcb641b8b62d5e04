"""``tf.train.Example`` without TensorFlow: the few protobuf rules its messages need.

``trainops pack --format tfrecord`` writes one Example per file, readable by
``tf.io.parse_single_example``; :func:`decode_example` reads them (and TensorFlow's own) back.
The messages (``tensorflow/core/example/{example,feature}.proto``)::

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }   # entries: { string key = 1; Feature value = 2; }
    Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed]; }
    Int64List { repeated int64 value = 1 [packed]; }

Every length read from the bytes is checked against what is left before it is used.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence

from trainops.data._errors import CorruptRecordError

__all__ = ["Feature", "decode_example", "encode_example"]

Feature = list[bytes] | list[float] | list[int]
_KINDS = {1: "bytes", 2: "float", 3: "int64"}


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 values go on the wire as two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(values: Sequence[bytes] | Sequence[float] | Sequence[int]) -> bytes:
    if all(isinstance(v, bytes) for v in values):
        return _field(1, b"".join(_field(1, v) for v in values))  # type: ignore[arg-type]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        packed = b"".join(_varint(int(v)) for v in values)
        return _field(3, _field(1, packed))
    if all(isinstance(v, float) for v in values):
        return _field(2, _field(1, struct.pack(f"<{len(values)}f", *values)))
    raise TypeError("a feature holds bytes, ints or floats, one kind at a time")


def encode_example(
    features: Mapping[str, Sequence[bytes] | Sequence[float] | Sequence[int]],
) -> bytes:
    """A serialized ``tf.train.Example`` with the given features (keys in sorted order)."""
    entries = (
        _field(1, _field(1, key.encode()) + _field(2, _feature(features[key])))
        for key in sorted(features)
    )
    return _field(1, b"".join(entries))


class ExampleError(ValueError):
    """Bytes that break the protobuf rules (turned into a CorruptRecordError for the user)."""


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ExampleError(f"bad varint at byte {at}")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """``(number, wire type, value)`` for each field; wire type 0 gives an int."""
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _read_varint(data, at)
            yield number, wire, value
        elif wire == 2:
            size, at = _read_varint(data, at)
            if size > len(data) - at:
                raise ExampleError(f"field {number} claims {size} bytes, {len(data) - at} remain")
            yield number, wire, data[at : at + size]
            at += size
        elif wire == 5:
            if at + 4 > len(data):
                raise ExampleError(f"field {number} is cut short")
            yield number, wire, data[at : at + 4]
            at += 4
        else:
            raise ExampleError(f"unsupported wire type {wire} for field {number}")


def _values(kind: int, body: bytes) -> Feature:
    out: list[object] = []
    for number, wire, value in _fields(body):
        if number != 1:
            continue
        if kind == 1 and isinstance(value, bytes):
            out.append(value)
        elif kind == 3:
            out += _int64s(value) if isinstance(value, bytes) else [_signed(value)]
        elif kind == 2 and isinstance(value, bytes):
            out += struct.unpack(f"<{len(value) // 4}f", value[: len(value) // 4 * 4])
        else:
            raise ExampleError(f"bad {_KINDS[kind]} value (wire type {wire})")
    return out  # type: ignore[return-value]


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _int64s(packed: bytes) -> list[int]:
    out, at = [], 0
    while at < len(packed):
        value, at = _read_varint(packed, at)
        out.append(_signed(value))
    return out


def _entry(body: bytes) -> tuple[str, Feature]:
    key, feature = "", b""
    for number, _, value in _fields(body):
        if number == 1 and isinstance(value, bytes):
            key = value.decode("utf-8", "replace")
        elif number == 2 and isinstance(value, bytes):
            feature = value
    for kind, _, values in _fields(feature):
        if kind in _KINDS and isinstance(values, bytes):
            return key, _values(kind, values)
    return key, []


def decode_example(data: bytes, *, source: str = "<record>", offset: int = 0) -> dict[str, Feature]:
    """The features of a serialized ``tf.train.Example``; bytes that are not one are a
    :class:`CorruptRecordError` naming ``source`` and the record's ``offset``."""
    try:
        return _features(data)
    except ExampleError as error:
        raise CorruptRecordError(source, offset, f"not a tf.train.Example: {error}") from None


def _features(data: bytes) -> dict[str, Feature]:
    features: dict[str, Feature] = {}
    for number, _, body in _fields(data):
        if number == 1 and isinstance(body, bytes):
            for entry_number, _, entry in _fields(body):
                if entry_number == 1 and isinstance(entry, bytes):
                    key, values = _entry(entry)
                    features[key] = values
    return features
