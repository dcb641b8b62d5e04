"""TensorBoard event files without TensorFlow: scalars written, rotated and synced while a job runs.

:class:`SummaryWriter` (``add_scalar``, ``flush``, ``close``) writes scalars into event files
TensorBoard reads; :class:`EventFileWriter` is the file layer under it (TFRecord framing of
hand-encoded ``Event`` protobufs, buffered, rotated by size and age). :class:`EventSync`
copies a log directory to an object-store prefix while it grows, each object ending on a
record boundary (:func:`complete_length`). :class:`ProfilerScalars` turns the profiler's local
step and system series into scalars. The agent's TensorBoard sidecar runs all three; a script
may use :class:`SummaryWriter` alone: ``from trainops.tensorboard import SummaryWriter``
(its default directory is the job's TensorBoard path, :data:`DIR_ENV`).
"""

from __future__ import annotations

from trainops.tensorboard._profiler import STEP_SCALARS, SYSTEM_SCALARS, ProfilerScalars
from trainops.tensorboard._proto import FILE_VERSION, file_version_event, scalar_event
from trainops.tensorboard._sync import EventSync, complete_length
from trainops.tensorboard._writer import DIR_ENV, EventFileWriter, SummaryWriter, event_file_name

__all__ = [
    "DIR_ENV",
    "FILE_VERSION",
    "STEP_SCALARS",
    "SYSTEM_SCALARS",
    "EventFileWriter",
    "EventSync",
    "ProfilerScalars",
    "SummaryWriter",
    "complete_length",
    "event_file_name",
    "file_version_event",
    "scalar_event",
]
