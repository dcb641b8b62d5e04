"""TensorBoard event files without TensorFlow: scalars, histograms and HParams, written, rotated
and synced while a job runs.

:class:`SummaryWriter` (``add_scalar``, ``add_histogram``, ``add_session_start``,
``add_session_end``, ``flush``, ``close``) writes event files TensorBoard reads;
:class:`EventFileWriter` is the file layer under it (TFRecord framing of hand-encoded ``Event``
protobufs, buffered, rotated by size and age). Histograms use TensorFlow's default buckets
(:data:`DEFAULT_BUCKET_LIMITS`); HParams sessions are the ``hparams`` plugin's start and end
infos. :class:`StepSummaries` is the debugger hook's layout (smdebug's: a run per mode, a file
per saved step). :class:`EventSync` copies a log directory to an object-store prefix while it
grows, each object ending on a record boundary (:func:`complete_length`).
:class:`ProfilerScalars` turns the profiler's local step and system series into scalars. The
agent's TensorBoard sidecar runs them; a script may use :class:`SummaryWriter` alone: ``from
trainops.tensorboard import SummaryWriter`` (its default directory is the job's TensorBoard
path, :data:`DIR_ENV`).
"""

from __future__ import annotations

from trainops.tensorboard._histogram import DEFAULT_BUCKET_LIMITS, Histogram, histogram_of
from trainops.tensorboard._hparams import (
    SESSION_END_TAG,
    SESSION_START_TAG,
    SessionStatus,
    hparam_value,
    session_end_event,
    session_start_event,
)
from trainops.tensorboard._modes import MODE_NAMES, StepSummaries, tensorboard_worker
from trainops.tensorboard._profiler import STEP_SCALARS, SYSTEM_SCALARS, ProfilerScalars
from trainops.tensorboard._proto import (
    FILE_VERSION,
    file_version_event,
    histogram_event,
    scalar_event,
)
from trainops.tensorboard._sync import EventSync, complete_length
from trainops.tensorboard._writer import DIR_ENV, EventFileWriter, SummaryWriter, event_file_name

__all__ = [
    "DEFAULT_BUCKET_LIMITS",
    "DIR_ENV",
    "FILE_VERSION",
    "MODE_NAMES",
    "SESSION_END_TAG",
    "SESSION_START_TAG",
    "STEP_SCALARS",
    "SYSTEM_SCALARS",
    "EventFileWriter",
    "EventSync",
    "Histogram",
    "ProfilerScalars",
    "SessionStatus",
    "StepSummaries",
    "SummaryWriter",
    "complete_length",
    "event_file_name",
    "file_version_event",
    "histogram_event",
    "histogram_of",
    "hparam_value",
    "scalar_event",
    "session_end_event",
    "session_start_event",
    "tensorboard_worker",
]
