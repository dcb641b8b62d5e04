"""Naming a job on the command line: its whole name, a unique start of it, or ``latest``.

Job names are long (``digits-2026-11-22-11-13-27-418``); the commands that take one accept any
start of a name that only one job's name has, and ``latest`` for the newest job. The whole name
always wins: a job named exactly what was typed is that job, even where other names start with
it (and a job named ``latest`` is that job). The REST API itself stays exact, as SageMaker's
DescribeTrainingJob is: a client asking for job ``a`` must never be answered about ``ab``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops._errors import JobNotFoundError, TrainopsError

if TYPE_CHECKING:
    from trainops.client._local import JobReader

__all__ = ["AmbiguousJobNameError", "resolve_job_name"]

LATEST = "latest"
MAX_NAME = 63  # the longest job name (trainops.spec.check_job_name)
# How many jobs whose names contain the text are looked at: past this, a start of a name shared
# by many jobs cannot be told unique (the page may leave out older ones).
_LOOKED_AT = 1000
_SHOWN = 5


class AmbiguousJobNameError(TrainopsError):
    """The start of a name that more than one job's name has."""


def resolve_job_name(jobs: JobReader, text: str) -> str:
    """The whole name of the job ``text`` names: itself, the newest job for ``latest``, or the
    one job whose name starts with it. :class:`JobNotFoundError` when no job matches,
    :class:`AmbiguousJobNameError` (listing a few) when several do."""
    if not text or len(text) > MAX_NAME:
        raise JobNotFoundError(
            f"no job named {_shown(text)}: a job's name has 1-{MAX_NAME} characters; give a "
            "job's name, the start of one, or latest"
        )
    found = [
        str(job["TrainingJobName"]) for job in jobs.list_jobs(name_contains=text, limit=_LOOKED_AT)
    ]
    complete = len(found) < _LOOKED_AT  # every job whose name contains the text is in ``found``
    if text in found or (not complete and _exists(jobs, text)):
        return text
    if text == LATEST:
        newest = jobs.list_jobs(limit=1)
        if not newest:
            raise JobNotFoundError("no job yet: `latest` names the newest job")
        return str(newest[0]["TrainingJobName"])
    starting = [name for name in found if name.startswith(text)]  # newest first
    if len(starting) == 1 and complete:
        return starting[0]
    if starting:
        raise AmbiguousJobNameError(_ambiguous(text, starting, complete=complete))
    if complete:
        raise JobNotFoundError(f"no job named {text!r} or whose name starts with it")
    raise JobNotFoundError(
        f"no job named {text!r}, and none of the {_LOOKED_AT} newest jobs whose names contain "
        "it starts with it; give the whole name"
    )


def _exists(jobs: JobReader, name: str) -> bool:
    try:
        jobs.describe(name)
    except JobNotFoundError:
        return False
    return True


def _ambiguous(text: str, names: list[str], *, complete: bool) -> str:
    count = f"{len(names)} jobs" if complete else f"{len(names)} or more jobs"
    shown = ", ".join(names[:_SHOWN]) + (", ..." if len(names) > _SHOWN or not complete else "")
    return f"{text!r} starts the names of {count} ({shown}); give more of the name"


def _shown(text: str) -> str:
    """``text`` quoted, cut short where it is too long to be a name."""
    return repr(text) if len(text) <= MAX_NAME else f"{text[:MAX_NAME]!r}..."
