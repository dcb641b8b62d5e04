"""Profiling a training job: system metrics, step timing, framework profiling windows.

Built in parts (issue 10): ``_series`` (the time-series chunk container every recorder
writes and every reader reads), ``_names`` (every series' columns and units), ``_layout`` (where profiler data lives on a host and in object
storage). The in-script API (``step()``, the automatic PyTorch hooks), the system monitor
sidecar, the readers, rules and report build on those two.
"""

from __future__ import annotations

from trainops.profiler._layout import CONFIG_ENV, CONFIG_FILE, DIR_ENV, profiler_prefix
from trainops.profiler._names import (
    DATALOADER_COLUMNS,
    MODE_EVAL,
    MODE_TRAIN,
    STEP_COLUMNS,
    SYSTEM_COLUMNS,
    UNITS,
    numbered,
)
from trainops.profiler._reader import ProfilerReader, SeriesKey
from trainops.profiler._series import (
    ChunkError,
    Series,
    SeriesChunk,
    SeriesWriter,
    decode_chunk,
    encode_chunk,
    merge_chunks,
)

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DATALOADER_COLUMNS",
    "DIR_ENV",
    "MODE_EVAL",
    "MODE_TRAIN",
    "STEP_COLUMNS",
    "SYSTEM_COLUMNS",
    "UNITS",
    "ChunkError",
    "ProfilerReader",
    "Series",
    "SeriesChunk",
    "SeriesKey",
    "SeriesWriter",
    "decode_chunk",
    "encode_chunk",
    "merge_chunks",
    "numbered",
    "profiler_prefix",
]
