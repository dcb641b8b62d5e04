"""The ``Event`` that carries one saved tensor, as smdebug writes it.

Field numbers (tensorboard's event.proto and summary.proto; smdebug's ``SummaryMetadata``
repeats ``plugin_data``)::

    Event           { double wall_time = 1; int64 step = 2; Summary summary = 5; }
    Summary         { repeated Value value = 1; }
    Value           { string tag = 1; SummaryMetadata metadata = 9; TensorProto tensor = 8; }
    SummaryMetadata { repeated PluginData plugin_data = 1; }
    PluginData      { string plugin_name = 1; bytes content = 2; }

The tag is the tensor's name; two plugin entries carry the mode step (``"mode_step"``) and the
mode's number (``"mode"``), both as decimal text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainops.debugger.format._tensor_proto import TensorLimits, decode_tensor, tensor_parts
from trainops.debugger.format._wire import (
    WireError,
    double_field,
    fields,
    len_field,
    len_head,
    varint_field,
)
from trainops.debugger.modes import MODE_PLUGIN_NAME, MODE_STEP_PLUGIN_NAME, ModeKeys

__all__ = [
    "TensorEvent",
    "decode_tensor_event",
    "encode_tensor_event",
    "mode_metadata",
    "tensor_event_parts",
]

_DEFAULT_LIMITS = TensorLimits()


@dataclass(frozen=True)
class TensorEvent:
    """One tensor read back from an event: its name, step, mode, mode step and value."""

    name: str
    step: int
    mode: ModeKeys
    mode_step: int
    value: np.ndarray
    wall_time: float


def _plugin(name: str, content: str) -> bytes:
    return len_field(1, len_field(1, name.encode()) + len_field(2, content.encode()))


def mode_metadata(mode: ModeKeys, mode_step: int) -> bytes:
    """The ``metadata`` field every tensor of one step shares (its mode step and mode)."""
    body = _plugin(MODE_STEP_PLUGIN_NAME, str(mode_step)) + _plugin(
        MODE_PLUGIN_NAME, str(int(mode))
    )
    return len_field(9, body)


def encode_tensor_event(
    name: str, value: np.ndarray, step: int, mode: ModeKeys, mode_step: int, wall_time: float
) -> bytes:
    """A serialized ``Event`` holding ``value`` under the tag ``name``."""
    head, content = tensor_event_parts(name, value, step, wall_time, mode_metadata(mode, mode_step))
    return head + bytes(content)


def tensor_event_parts(
    name: str, value: np.ndarray, step: int, wall_time: float, metadata: bytes
) -> tuple[bytes, memoryview]:
    """The ``Event`` as ``head + content`` (the tensor's bytes, not copied): a writer writes
    both without joining them. ``metadata`` is :func:`mode_metadata`'s."""
    tensor_head, content = tensor_parts(value)
    tensor_length = len(tensor_head) + len(content)
    value_head = len_field(1, name.encode("utf-8")) + metadata + len_head(8, tensor_length)
    value_length = len(value_head) + tensor_length
    summary_head = len_head(1, value_length)
    summary_length = len(summary_head) + value_length
    head = double_field(1, wall_time) if wall_time else b""
    head += varint_field(2, step) if step else b""
    head += len_head(5, summary_length) + summary_head + value_head + tensor_head
    return head, content


def decode_tensor_event(
    data: bytes | memoryview, limits: TensorLimits = _DEFAULT_LIMITS
) -> list[TensorEvent]:
    """Every tensor value in a serialized ``Event`` (none for an event of another kind)."""
    wall_time, step, summary = 0.0, 0, None
    for number, _, _, value in fields(data):
        if number == 1 and isinstance(value, int):
            wall_time = float(np.array([value], dtype=np.uint64).view(np.float64)[0])
        elif number == 2 and isinstance(value, int):
            step = value
        elif number == 5 and isinstance(value, memoryview):
            summary = value
    if summary is None:
        return []
    out = []
    for number, _, _, value in fields(summary):
        if number == 1 and isinstance(value, memoryview):
            event = _value(value, step, wall_time, limits)
            if event is not None:
                out.append(event)
    return out


def _value(
    body: memoryview, step: int, wall_time: float, limits: TensorLimits
) -> TensorEvent | None:
    tag, tensor, plugins = "", None, {}
    for number, _, _, value in fields(body):
        if not isinstance(value, memoryview):
            continue
        if number == 1:
            tag = bytes(value).decode("utf-8", "replace")
        elif number == 8:
            tensor = value
        elif number == 9:
            plugins.update(_plugins(value))
    if tensor is None:
        return None
    mode = ModeKeys(_int(plugins.get(MODE_PLUGIN_NAME), int(ModeKeys.GLOBAL), 1, 4))
    mode_step = _int(plugins.get(MODE_STEP_PLUGIN_NAME), step, 0, 1 << 62)
    return TensorEvent(tag, step, mode, mode_step, decode_tensor(tensor, limits), wall_time)


def _plugins(body: memoryview) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, _, _, value in fields(body):
        if number == 1 and isinstance(value, memoryview):
            name = content = ""
            for inner, _, _, item in fields(value):
                if isinstance(item, memoryview) and inner in (1, 2):
                    text = bytes(item[:64]).decode("utf-8", "replace")
                    name, content = (text, content) if inner == 1 else (name, text)
            out[name] = content
    return out


def _int(text: str | None, default: int, least: int, most: int) -> int:
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise WireError(0, f"plugin value {text!r} is not an integer") from None
    if not least <= value <= most:
        raise WireError(0, f"plugin value {value} out of range")
    return value
