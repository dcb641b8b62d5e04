"""TensorFlow's ``TensorProto`` for numpy arrays: the dtypes, the shape and the raw content.

Field numbers (tensorflow/core/framework/tensor.proto, tensor_shape.proto, types.proto)::

    TensorProto      { DataType dtype = 1; TensorShapeProto tensor_shape = 2;
                       bytes tensor_content = 4; repeated bytes string_val = 8;
                       float_val = 5; double_val = 6; int_val = 7; int64_val = 10;
                       bool_val = 11; half_val = 13 (all packed) }
    TensorShapeProto { repeated Dim dim = 2; }   Dim { int64 size = 1; string name = 2; }

Numbers go in ``tensor_content`` (little-endian, as smdebug writes them); strings in
``string_val`` with no dtype (``DT_INVALID``), as smdebug writes them and its reader wants
(``DT_STRING`` reads too). bfloat16 (``DT_BFLOAT16``) is read back as float32, the value it holds exactly;
it is written from an ``ml_dtypes.bfloat16`` array where that package is present.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from trainops.debugger.format._wire import (
    WireError,
    fields,
    len_field,
    len_head,
    read_varint,
    varint_field,
)

__all__ = ["DTYPES", "TensorLimits", "decode_tensor", "encode_tensor", "tensor_parts"]

# DataType enum value -> numpy dtype (little-endian); DT_STRING (7) and DT_BFLOAT16 (14) apart.
DTYPES: dict[int, np.dtype[np.generic]] = {
    1: np.dtype("<f4"),
    2: np.dtype("<f8"),
    3: np.dtype("<i4"),
    4: np.dtype("u1"),
    5: np.dtype("<i2"),
    6: np.dtype("i1"),
    8: np.dtype("<c8"),
    9: np.dtype("<i8"),
    10: np.dtype("?"),
    17: np.dtype("<u2"),
    18: np.dtype("<c16"),
    19: np.dtype("<f2"),
    22: np.dtype("<u4"),
    23: np.dtype("<u8"),
}
_CODE = {
    dtype.newbyteorder("=") if dtype.itemsize > 1 else dtype: code for code, dtype in DTYPES.items()
}
_CODE_OF: dict[np.dtype[np.generic], int] = {}  # every dtype seen, by its code (a cache)
_INVALID, _STRING, _BFLOAT16 = 0, 7, 14
_VALUE_FIELDS = {5: "<f4", 6: "<f8", 7: "<i4", 10: "<i8", 11: "?", 13: "<i4"}


@dataclass(frozen=True)
class TensorLimits:
    """Bounds on one decoded tensor (a hostile file must not make the reader allocate more)."""

    max_dims: int = 32
    max_elements: int = 1 << 28
    max_strings: int = 1 << 20


def _dtype_code(array: np.ndarray) -> int:
    code = _CODE_OF.get(array.dtype)
    if code is None:
        code = _CODE_OF[array.dtype] = _find_code(array.dtype)
    return code


def _find_code(dtype: np.dtype[np.generic]) -> int:
    if dtype.kind in "USO":
        return _STRING
    if dtype.name == "bfloat16":
        return _BFLOAT16
    code = _CODE.get(dtype.newbyteorder("=") if dtype.itemsize > 1 else dtype)
    if code is None:
        raise TypeError(f"cannot save a tensor of dtype {dtype}")
    return code


def encode_tensor(array: np.ndarray) -> bytes:
    """``array`` as a serialized ``TensorProto``."""
    head, content = tensor_parts(array)
    return head + bytes(content)


def tensor_parts(array: np.ndarray) -> tuple[bytes, memoryview]:
    """A serialized ``TensorProto`` as ``head + content``: ``content`` is the array's own
    little-endian bytes (no copy where the array is contiguous and little-endian already)."""
    code = _dtype_code(array)
    dims = b"".join(len_field(2, varint_field(1, size) if size else b"") for size in array.shape)
    if code == _STRING:  # as smdebug writes strings: no dtype (DT_INVALID), which its reader wants
        head = len_field(2, dims)
        strings = b"".join(len_field(8, str(item).encode("utf-8")) for item in array.reshape(-1))
        return head + strings, memoryview(b"")
    little = np.ascontiguousarray(array.astype(array.dtype.newbyteorder("<"), copy=False))
    content = little.reshape(-1).view(np.uint8).data
    return varint_field(1, code) + len_field(2, dims) + len_head(4, len(content)), content


def _shape(body: memoryview, limits: TensorLimits) -> tuple[int, ...]:
    dims: list[int] = []
    for number, _, at, value in fields(body):
        if number != 2 or not isinstance(value, memoryview):
            continue
        size = 0
        for inner, _, _, item in fields(value):
            if inner == 1 and isinstance(item, int):
                size = item
        if size >= 1 << 62:
            raise WireError(at, f"dimension of size {size}")
        dims.append(size)
        if len(dims) > limits.max_dims:
            raise WireError(at, f"more than {limits.max_dims} dimensions")
    return tuple(dims)


def decode_tensor(body: memoryview, limits: TensorLimits = TensorLimits()) -> np.ndarray:
    """A serialized ``TensorProto`` back to an array (copied: it does not hold ``body``)."""
    code, content = _INVALID, None
    shape: tuple[int, ...] = ()
    strings: list[bytes] = []
    values: dict[int, list[memoryview | int]] = {}
    for number, _, at, value in fields(body):
        if number == 1 and isinstance(value, int):
            code = value
        elif number == 2 and isinstance(value, memoryview):
            shape = _shape(value, limits)
        elif number == 4 and isinstance(value, memoryview):
            content = value
        elif number == 8 and isinstance(value, memoryview):
            if len(strings) >= limits.max_strings:
                raise WireError(at, f"more than {limits.max_strings} strings")
            strings.append(bytes(value))
        elif number in _VALUE_FIELDS:
            values.setdefault(number, []).append(value)
    count = _count(shape, limits)
    if code == _STRING or (code == _INVALID and strings):
        return _strings(strings, shape, count)
    flat = _numbers(code, content, values, count)
    return flat.reshape(shape)


def _count(shape: tuple[int, ...], limits: TensorLimits) -> int:
    count = 1
    for size in shape:
        count *= size
        if count > limits.max_elements:
            raise WireError(
                0, f"tensor of shape {list(shape)} exceeds {limits.max_elements} elements"
            )
    return count


def _strings(strings: list[bytes], shape: tuple[int, ...], count: int) -> np.ndarray:
    if len(strings) != count:
        raise WireError(0, f"{len(strings)} strings for a tensor of shape {list(shape)}")
    return np.array([s.decode("utf-8", "replace") for s in strings], dtype=object).reshape(shape)


def _numbers(
    code: int, content: memoryview | None, values: dict[int, list[memoryview | int]], count: int
) -> np.ndarray:
    if code == _BFLOAT16:
        raw = _content(content, np.dtype("<u2"), count)
        return (raw.astype(np.uint32) << 16).view(np.float32)
    dtype = DTYPES.get(code)
    if dtype is None:
        raise WireError(0, f"unsupported tensor dtype code {code}")
    if content is not None:
        return _content(content, dtype, count).astype(dtype.newbyteorder("="))
    return _typed_values(dtype, values, count)


def _content(content: memoryview | None, dtype: np.dtype[np.generic], count: int) -> np.ndarray:
    data = content if content is not None else memoryview(b"")
    if len(data) != count * dtype.itemsize:
        raise WireError(
            0, f"tensor content of {len(data)} bytes, {count} x {dtype.itemsize} expected"
        )
    return np.frombuffer(data, dtype=dtype, count=count).copy()


def _typed_values(
    dtype: np.dtype[np.generic], values: dict[int, list[memoryview | int]], count: int
) -> np.ndarray:
    """The ``*_val`` fields (TensorFlow writes small tensors this way); one value broadcasts."""
    for number, items in values.items():
        parts = _unpack(number, items, count)
        if parts.size == count:
            return parts.astype(dtype)
        if parts.size == 1:
            return np.full(count, parts[0], dtype=dtype)
        raise WireError(0, f"{parts.size} values for a tensor of {count} elements")
    return np.zeros(count, dtype=dtype)


def _unpack(number: int, items: list[memoryview | int], count: int) -> np.ndarray:
    kind = _VALUE_FIELDS[number]
    out: list[np.ndarray] = []
    for item in items:
        if isinstance(item, memoryview):
            if number in (7, 10, 11, 13):
                out.append(np.array(_varints(item, count), dtype=np.int64))
            else:
                width = struct.calcsize(kind)
                if len(item) % width or len(item) // width > count:
                    raise WireError(0, "packed values do not fit the tensor")
                out.append(np.frombuffer(item, dtype=kind).copy())
        else:
            out.append(np.array([item]))
    return np.concatenate(out) if out else np.zeros(0)


def _varints(body: memoryview, count: int) -> list[int]:
    out: list[int] = []
    pos = 0
    while pos < len(body):
        value, pos = read_varint(body, pos, len(body))
        out.append(value - (1 << 64) if value >= 1 << 63 else value)
        if len(out) > count:
            raise WireError(0, "more packed values than the tensor holds")
    return out
