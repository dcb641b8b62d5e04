"""The exceptions trainops raises for things a user can fix.

Every user-facing failure is a :class:`TrainopsError` whose message says what was wrong and where;
the CLI prints the message (never a traceback) and exits non-zero.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "TUNING_JOB",
    "ArchiveError",
    "ConfigError",
    "JobNotFoundError",
    "ServerError",
    "SpecError",
    "StorageError",
    "TrainopsError",
    "UnexpectedStatusError",
]

#: The subject of a tuning job's refusals: ``invalid tuning job in tune.yaml:``.
TUNING_JOB = "tuning job"


class TrainopsError(Exception):
    """Base class of errors that are reported to the user as a message."""


class ConfigError(TrainopsError):
    """A setting in the environment or in ``config.yaml`` is invalid."""


class SpecError(TrainopsError):
    """A job spec is invalid. ``problems`` lists ``(field path, reason)`` pairs.

    ``subject`` is what was declared (the message's heading says ``invalid <subject>``): a job
    spec, or another declaration checked the same way, such as a tuning job.
    """

    def __init__(
        self,
        problems: list[tuple[str, str]],
        source: str | None = None,
        *,
        subject: str = "job spec",
    ) -> None:
        self.problems = problems
        self.source = source
        self.subject = subject
        head = f"invalid {subject}{f' in {source}' if source else ''}"
        whole = "<spec>" if subject == "job spec" else f"<{subject}>"  # a problem of no field
        lines = [f"  {path or whole}: {reason}" for path, reason in problems]
        super().__init__("\n".join([head + ":", *lines]))


class StorageError(TrainopsError):
    """An object-storage operation failed (URI, permissions, endpoint, missing object)."""


class ArchiveError(TrainopsError):
    """A tarball is malformed or tries to write outside its target directory."""


class JobNotFoundError(TrainopsError):
    """No job has the given name."""


class ServerError(TrainopsError):
    """The control plane could not be reached or answered with an error."""


class UnexpectedStatusError(TrainopsError):
    """A job waited on ended in a status other than the ones asked for: ``fit()`` and ``wait()``
    raise it for a Failed job, as the SageMaker SDK raises its ``UnexpectedStatusException``
    (Completed and Stopped return). The message is the SDK's (``Error for Training job <name>:
    Failed. Reason: <FailureReason>``); ``description`` is the job's final description."""

    def __init__(
        self,
        message: str,
        allowed_statuses: tuple[str, ...],
        actual_status: str,
        description: dict[str, Any],
    ) -> None:
        super().__init__(message)
        self.allowed_statuses = allowed_statuses
        self.actual_status = actual_status
        self.description = description


#: The statuses a waited-on job may end in without :class:`UnexpectedStatusError` (the SDK's).
ALLOWED_END_STATUSES = ("Completed", "Stopped")


def check_end_status(description: dict[str, Any], status_key: str, name_key: str) -> None:
    """Raise :class:`UnexpectedStatusError` unless ``description`` ended Completed or Stopped,
    worded as the SageMaker SDK words it (``TrainingJobStatus`` → ``Training job``)."""
    status = str(description.get(status_key))
    if status in ALLOWED_END_STATUSES:
        return
    kind = status_key.replace("JobStatus", " job")
    reason = description.get("FailureReason") or "(No reason provided)"
    message = f"Error for {kind} {description.get(name_key)}: {status}. Reason: {reason}"
    raise UnexpectedStatusError(message, ALLOWED_END_STATUSES, status, description)
