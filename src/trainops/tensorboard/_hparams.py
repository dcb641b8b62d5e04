"""TensorBoard's HParams: a run's hyperparameters at its start and its outcome at its end.

The ``hparams`` plugin reads two summaries from a run's event files (the plugin's
``plugin_data.content`` is a serialized ``HParamsPluginData``;
tensorboard/plugins/hparams/plugin_data.proto and api.proto)::

    message HParamsPluginData { int32 version = 1; oneof data {
        SessionStartInfo session_start_info = 3; SessionEndInfo session_end_info = 4; } }
    message SessionStartInfo { map<string, google.protobuf.Value> hparams = 1;
        string group_name = 4; double start_time_secs = 5; }
    message SessionEndInfo { Status status = 1; double end_time_secs = 2; }
    message Value { oneof kind { double number_value = 2; string string_value = 3;
        bool bool_value = 4; } }

under the tags ``_hparams_/session_start_info`` and ``_hparams_/session_end_info``, each with an
empty float tensor, as ``tensorboard.plugins.hparams.summary_v2.hparams_pb`` writes them. Without
an experiment summary the dashboard infers the experiment: the hyperparameters from every run's
start info, the metrics from the scalar tags of each run (so the run that holds the start info
should hold the metric scalars too). SageMaker's hyperparameters are strings: one that reads as a
finite number is written as a number (so the dashboard can sort and filter it), ``true`` and
``false`` as booleans, anything else as a string.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Mapping

from trainops.tensorboard._proto import double_field, length_field, plugin_event, varint

__all__ = [
    "PLUGIN_NAME",
    "SESSION_END_TAG",
    "SESSION_START_TAG",
    "HParam",
    "SessionStatus",
    "hparam_value",
    "session_end_event",
    "session_start_event",
]

PLUGIN_NAME = "hparams"
SESSION_START_TAG = "_hparams_/session_start_info"
SESSION_END_TAG = "_hparams_/session_end_info"
#: ``TensorProto{dtype: DT_FLOAT, tensor_shape {dim {size: 0}}}``: the plugin's NULL_TENSOR.
_NULL_TENSOR = b"\x08\x01\x12\x02\x12\x00"

HParam = float | int | bool | str


class SessionStatus(enum.IntEnum):
    """api.proto's ``Status``."""

    UNKNOWN = 0
    SUCCESS = 1
    FAILURE = 2
    RUNNING = 3


def hparam_value(value: HParam) -> HParam:
    """How a hyperparameter is shown: a string that reads as a finite number becomes that
    number, ``"true"``/``"false"`` (any case) a boolean; other values are kept."""
    if not isinstance(value, str):
        return value
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        number = float(value)
    except ValueError:
        return value
    return number if math.isfinite(number) else value


def _value(value: HParam) -> bytes:
    """A ``google.protobuf.Value`` (a oneof member: written even at its default)."""
    if isinstance(value, bool):
        return b"\x20" + varint(int(value))
    if isinstance(value, int | float):
        return b"\x11" + struct.pack("<d", float(value))
    return b"\x1a" + _string(value)


def _string(text: str) -> bytes:
    """A string's length and UTF-8 bytes (a lone surrogate becomes ``?``)."""
    raw = text.encode("utf-8", "replace")
    return varint(len(raw)) + raw


def session_start_event(hparams: Mapping[str, HParam], group_name: str, start_time: float) -> bytes:
    """The event that starts a session: ``hparams`` (shown through :func:`hparam_value`),
    sorted by name, in the session group ``group_name``."""
    entries = b""
    for name in sorted(hparams):
        value = _value(hparam_value(hparams[name]))
        entry = b"\x0a" + _string(name) + b"\x12" + varint(len(value)) + value
        entries += b"\x0a" + varint(len(entry)) + entry
    info = entries + length_field(4, group_name.encode("utf-8", "replace"))
    info += double_field(5, start_time)
    content = b"\x1a" + varint(len(info)) + info  # a oneof member: written even when empty
    return plugin_event(SESSION_START_TAG, PLUGIN_NAME, content, _NULL_TENSOR, 0, start_time)


def session_end_event(status: SessionStatus, end_time: float) -> bytes:
    """The event that ends a session with ``status`` at ``end_time`` (Unix seconds)."""
    info = (b"\x08" + varint(int(status)) if status else b"") + double_field(2, end_time)
    content = b"\x22" + varint(len(info)) + info
    return plugin_event(SESSION_END_TAG, PLUGIN_NAME, content, _NULL_TENSOR, 0, end_time)
