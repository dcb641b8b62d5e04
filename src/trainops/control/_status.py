"""Job statuses (SageMaker's primary and secondary ones), why a job is stopping, and messages."""

from __future__ import annotations

from enum import StrEnum

from trainops._errors import TrainopsError

__all__ = [
    "CAPACITY_WAIT_MESSAGE",
    "ENDED",
    "HOST_LOST",
    "PHASE_MESSAGES",
    "PHASE_RANK",
    "STARTING_MESSAGE",
    "AgentAuthError",
    "JobEndedError",
    "PrimaryStatus",
    "SecondaryStatus",
    "StopReason",
    "seconds_shown",
]


class PrimaryStatus(StrEnum):
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"


class SecondaryStatus(StrEnum):
    STARTING = "Starting"
    PENDING = "Pending"
    DOWNLOADING = "Downloading"
    TRAINING = "Training"
    UPLOADING = "Uploading"
    RESTARTING = "Restarting"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
    COMPLETED = "Completed"
    FAILED = "Failed"
    INTERRUPTED = "Interrupted"
    MAX_WAIT_TIME_EXCEEDED = "MaxWaitTimeExceeded"


class StopReason(StrEnum):
    """Why the hosts of a job's current attempt are being told to stop (``jobs.stop_reason``)."""

    STOPPED = "Stopped"  # the user asked; ends Stopped/Stopped
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"  # ends Stopped/MaxRuntimeExceeded
    RESTARTING = "Restarting"  # an internal error; the job runs again once every host is down
    FAILED = "Failed"  # the job has failed; the remaining hosts are torn down
    INTERRUPTED = "Interrupted"  # a spot interruption; waits for capacity, then a new attempt
    MAX_WAIT_EXCEEDED = "MaxWaitTimeExceeded"  # a spot job's wait ran out; ends Stopped


ENDED = frozenset({PrimaryStatus.COMPLETED, PrimaryStatus.FAILED, PrimaryStatus.STOPPED})

# Secondary statuses the hosts' phases move through; a job only ever moves forward along them.
PHASE_RANK = {
    SecondaryStatus.STARTING: 0,
    SecondaryStatus.DOWNLOADING: 1,
    SecondaryStatus.TRAINING: 2,
    SecondaryStatus.UPLOADING: 3,
}

# A host whose agent ended without reporting an exit (or could not be started).
HOST_LOST = "Lost"

STARTING_MESSAGE = "Preparing the instances for training"
CAPACITY_WAIT_MESSAGE = "Waiting for spot capacity"
PHASE_MESSAGES = {
    SecondaryStatus.DOWNLOADING: "Downloading input data",
    SecondaryStatus.TRAINING: "Training image download completed. Training in progress.",
    SecondaryStatus.UPLOADING: "Uploading generated training model",
}


class JobEndedError(TrainopsError):
    """The job has already ended (Completed, Failed or Stopped)."""


class AgentAuthError(TrainopsError):
    """An agent request without the live token of its host (or for a host the job does not have)."""


def seconds_shown(seconds: float) -> str:
    """Seconds as a person reads them in a status message: whole seconds, tenths below ten
    (a notice of 29.8282 s reads 30, a gap of 2.49268 s reads 2.5)."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}".removesuffix(".0")
