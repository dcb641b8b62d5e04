"""The exceptions trainops raises for things a user can fix.

Every user-facing failure is a :class:`TrainopsError` whose message says what was wrong and where;
the CLI prints the message (never a traceback) and exits non-zero.
"""

from __future__ import annotations

__all__ = [
    "TUNING_JOB",
    "ArchiveError",
    "ConfigError",
    "JobNotFoundError",
    "ServerError",
    "SpecError",
    "StorageError",
    "TrainopsError",
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
