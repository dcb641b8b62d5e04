"""Job names: the user's ``job_name``, or a base name plus a millisecond timestamp (as the SDK does)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import PurePosixPath

from trainops._errors import SpecError
from trainops.spec._job import JOB_NAME, JobSpec

__all__ = ["check_job_name", "make_job_name"]

_TIMESTAMP_LEN = len("-2024-01-01-00-00-00-000")


def make_job_name(spec: JobSpec, now: datetime | None = None) -> str:
    """``spec.job_name`` if set, else ``<base>-YYYY-MM-DD-HH-MM-SS-mmm`` (at most 63 characters)."""
    if spec.job_name:
        return spec.job_name
    now = now or datetime.now(UTC)
    base = spec.base_job_name or _base_from_entry_point(spec.entry_point)
    base = base[: 63 - _TIMESTAMP_LEN].rstrip("-") or "job"
    stamp = now.strftime("%Y-%m-%d-%H-%M-%S-") + f"{now.microsecond // 1000:03d}"
    return f"{base}-{stamp}"


def _base_from_entry_point(entry_point: str) -> str:
    stem = PurePosixPath(entry_point).stem
    cleaned = re.sub(r"[^A-Za-z0-9]+", "-", stem).strip("-")
    return cleaned or "job"


def check_job_name(name: str) -> str:
    """``name`` if it is a valid job name, else :class:`SpecError` about ``job_name``."""
    if not JOB_NAME.match(name):
        raise SpecError(
            [
                (
                    "job_name",
                    f"{name!r}: must be 1-63 letters, digits or hyphens, starting and ending "
                    "with a letter or digit",
                )
            ]
        )
    return name
