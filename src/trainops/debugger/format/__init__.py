"""The debugger's on-disk format, smdebug's: TFRecord event files of tensors, JSON indexes.

Layout (:mod:`._layout`), the ``Event``/``TensorProto`` encoding (:mod:`._event`,
:mod:`._tensor_proto` over the wire format in :mod:`._wire`), index files (:mod:`._index`),
reduction names and values (:mod:`._reductions`), bounded record reads (:mod:`._records`) and
the job-side :class:`TensorFileWriter` (:mod:`._writer`).
"""

from __future__ import annotations

from trainops.debugger.format._event import TensorEvent, decode_tensor_event, encode_tensor_event
from trainops.debugger.format._index import (
    IndexEntry,
    IndexLimits,
    ShapeEntry,
    StepIndex,
    encode_index,
    parse_index,
)
from trainops.debugger.format._layout import (
    COLLECTIONS_DIR,
    DEFAULT_WORKER,
    END_MARKER,
    EVENTS_DIR,
    INDEX_DIR,
    collections_key,
    event_file_key,
    index_key,
    parse_index_key,
    worker_name,
)
from trainops.debugger.format._records import read_record, records
from trainops.debugger.format._reductions import (
    REDUCTIONS_PREFIX,
    compute_reduction,
    reduction_tensor_name,
    reverse_reduction_tensor_name,
)
from trainops.debugger.format._tensor_proto import TensorLimits, decode_tensor, encode_tensor
from trainops.debugger.format._writer import TensorFileWriter, mark_training_end

__all__ = [
    "COLLECTIONS_DIR",
    "DEFAULT_WORKER",
    "END_MARKER",
    "EVENTS_DIR",
    "INDEX_DIR",
    "REDUCTIONS_PREFIX",
    "IndexEntry",
    "IndexLimits",
    "ShapeEntry",
    "StepIndex",
    "TensorEvent",
    "TensorFileWriter",
    "TensorLimits",
    "collections_key",
    "compute_reduction",
    "decode_tensor",
    "decode_tensor_event",
    "encode_index",
    "encode_tensor",
    "encode_tensor_event",
    "event_file_key",
    "index_key",
    "mark_training_end",
    "parse_index",
    "parse_index_key",
    "read_record",
    "records",
    "reduction_tensor_name",
    "reverse_reduction_tensor_name",
    "worker_name",
]
