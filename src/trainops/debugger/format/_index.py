"""Index files: one JSON per step and worker saying where each tensor's record is.

::

    {"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "events/.../..tfevents"},
     "tensor_payload": [{"tensorname": "w", "start_idx": 0, "length": 120}, ...],
     "shape_payload":  [{"tensorname": "w", "originalname": "w", "shape": [3, 4]}, ...]}

``start_idx``/``length`` cover the whole TFRecord (header, payload and CRC). Parsing checks
every field and bounds the counts: an index is untrusted input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainops.debugger.modes import ModeKeys, parse_mode

__all__ = ["IndexEntry", "IndexLimits", "ShapeEntry", "StepIndex", "encode_index", "parse_index"]


@dataclass(frozen=True)
class IndexLimits:
    max_bytes: int = 64 << 20
    max_tensors: int = 100_000
    max_name: int = 1024
    max_record_bytes: int = 1 << 30
    max_step_bytes: int = 16 << 30  # all of one step's records of one worker


@dataclass(frozen=True)
class IndexEntry:
    name: str
    start: int
    length: int


@dataclass(frozen=True)
class ShapeEntry:
    name: str
    original_name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class StepIndex:
    mode: ModeKeys
    mode_step: int
    event_file: str | None
    tensors: tuple[IndexEntry, ...]
    shapes: tuple[ShapeEntry, ...]


def encode_index(
    mode: ModeKeys,
    mode_step: int,
    event_file: str | None,
    tensors: list[IndexEntry],
    shapes: list[ShapeEntry],
) -> bytes:
    meta: dict[str, Any] = {"mode": mode.name, "mode_step": mode_step}
    if event_file is not None:
        meta["event_file_name"] = event_file
    return json.dumps(
        {
            "meta": meta,
            "tensor_payload": [
                {"tensorname": t.name, "start_idx": t.start, "length": t.length} for t in tensors
            ],
            "shape_payload": [
                {"tensorname": s.name, "originalname": s.original_name, "shape": list(s.shape)}
                for s in shapes
            ],
        }
    ).encode()


def parse_index(raw: bytes, limits: IndexLimits = IndexLimits()) -> StepIndex:
    """Check and parse an index file's bytes; a ``ValueError`` says what is wrong."""
    if len(raw) > limits.max_bytes:
        raise ValueError(f"index of {len(raw)} bytes exceeds {limits.max_bytes}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"not valid JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict):
        raise ValueError("an index must be an object with a 'meta' object")
    meta = data["meta"]
    mode = parse_mode(meta.get("mode", "GLOBAL"))
    mode_step = _natural(meta.get("mode_step"), "meta.mode_step", 1 << 62)
    event_file = meta.get("event_file_name")
    if event_file is not None and not _event_key(event_file):
        raise ValueError(
            f"meta.event_file_name {str(event_file)[:200]!r} is not events/.../*.tfevents"
        )
    tensors = [_tensor(item, limits) for item in _list(data, "tensor_payload", limits)]
    if tensors and event_file is None:
        raise ValueError("tensor_payload without meta.event_file_name")
    total = sum(entry.length for entry in tensors)
    if total > limits.max_step_bytes:
        raise ValueError(
            f"the step's records add up to {total} bytes, over {limits.max_step_bytes}"
        )
    shapes = [_shape(item, limits) for item in _list(data, "shape_payload", limits)]
    return StepIndex(mode, mode_step, event_file, tuple(tensors), tuple(shapes))


def _event_key(value: object) -> bool:
    """A relative key under ``events/``, without ``..`` or empty parts (it is joined to the
    trial's location)."""
    if not isinstance(value, str) or len(value) > 4096 or "\\" in value:
        return False
    parts = value.split("/")
    safe = all(part not in ("", ".", "..") for part in parts)
    return safe and parts[0] == "events" and value.endswith(".tfevents")


def _list(data: dict[str, Any], key: str, limits: IndexLimits) -> list[Any]:
    items = data.get(key) or []
    if not isinstance(items, list):
        raise ValueError(f"{key} must be a list")
    if len(items) > limits.max_tensors:
        raise ValueError(f"{key} has {len(items)} entries, at most {limits.max_tensors}")
    return items


def _natural(value: object, where: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise ValueError(f"{where} must be an integer from 0 to {most}, not {value!r}")
    return value


def _name(value: object, where: str, limits: IndexLimits) -> str:
    if not isinstance(value, str) or not value or len(value) > limits.max_name:
        raise ValueError(f"{where} must be a name of 1-{limits.max_name} characters")
    return value


def _tensor(item: object, limits: IndexLimits) -> IndexEntry:
    if not isinstance(item, dict):
        raise ValueError("a tensor_payload entry must be an object")
    name = _name(item.get("tensorname"), "tensor_payload.tensorname", limits)
    start = _natural(item.get("start_idx"), f"tensor_payload[{name!r}].start_idx", 1 << 62)
    length = _natural(
        item.get("length"), f"tensor_payload[{name!r}].length", limits.max_record_bytes
    )
    if length < 16:
        raise ValueError(f"tensor_payload[{name!r}].length {length} is shorter than a record")
    return IndexEntry(name, start, length)


def _shape(item: object, limits: IndexLimits) -> ShapeEntry:
    if not isinstance(item, dict):
        raise ValueError("a shape_payload entry must be an object")
    name = _name(item.get("tensorname"), "shape_payload.tensorname", limits)
    original = item.get("originalname", name)
    original = _name(original, "shape_payload.originalname", limits)
    shape = item.get("shape")
    if not isinstance(shape, list) or len(shape) > 32:
        raise ValueError(f"shape_payload[{name!r}].shape must be a list of at most 32 sizes")
    sizes = tuple(_natural(size, f"shape_payload[{name!r}].shape", 1 << 62) for size in shape)
    return ShapeEntry(name, original, sizes)
