"""Profiling a training job: system metrics, step timing, framework profiling windows.

Built in parts (issue 10): ``_series`` (the time-series chunk container every recorder
writes and every reader reads), ``_names`` (every series' columns and units), ``_layout`` (where
profiler data lives on a host and in object storage), ``_reader`` (reading a job's prefix).

In the script: ``_settings`` (what the recorder reads from its environment), ``_recorder`` (one
row per step), ``_torch_hooks`` (the automatic PyTorch hooks, installed by
``_bootstrap/sitecustomize.py`` when torch is imported), ``_api`` (:data:`step` and
:func:`phase`, the one line for other loops), ``_windows`` and ``_pystats`` (the detailed,
dataloader and Python profiling windows). Nothing here imports torch until a script does.
"""

from __future__ import annotations

from trainops.profiler._api import Step, phase, step
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
from trainops.profiler._reader import MAX_CHUNK_BYTES, ProfilerReader, SeriesKey
from trainops.profiler._series import (
    ChunkError,
    Series,
    SeriesChunk,
    SeriesWriter,
    decode_chunk,
    encode_chunk,
    merge_chunks,
)
from trainops.profiler._settings import RecorderSettings, Window, read_settings

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DATALOADER_COLUMNS",
    "DIR_ENV",
    "MAX_CHUNK_BYTES",
    "MODE_EVAL",
    "MODE_TRAIN",
    "STEP_COLUMNS",
    "SYSTEM_COLUMNS",
    "UNITS",
    "ChunkError",
    "ProfilerReader",
    "RecorderSettings",
    "Series",
    "SeriesChunk",
    "SeriesKey",
    "SeriesWriter",
    "Step",
    "Window",
    "decode_chunk",
    "encode_chunk",
    "merge_chunks",
    "numbered",
    "phase",
    "profiler_prefix",
    "read_settings",
    "step",
]
