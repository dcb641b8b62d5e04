"""Job names: the user's ``job_name``, or a base name plus a millisecond timestamp (as the SDK does).

Generated names must never collide, however many submissions run at once, so the server hands
them out (:class:`JobNamer`): its timestamps only move forward and skip names already taken.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from trainops._errors import SpecError

if TYPE_CHECKING:
    from trainops.spec._job import JobSpec

__all__ = [
    "JOB_NAME",
    "JobNamer",
    "base_job_name",
    "base_name_for",
    "check_job_name",
    "is_job_name",
    "make_job_name",
]

JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")

_TIMESTAMP_LEN = len("-2024-01-01-00-00-00-000")


def make_job_name(spec: JobSpec, now: datetime | None = None) -> str:
    """``spec.job_name`` if set, else ``<base>-YYYY-MM-DD-HH-MM-SS-mmm`` (at most 63 characters)."""
    if spec.job_name:
        return spec.job_name
    return _stamped(base_job_name(spec), now or datetime.now(UTC))


def base_job_name(spec: JobSpec) -> str:
    """The base of a generated name: ``base_job_name``, or one made from the entry point."""
    return base_name_for(spec.base_job_name, spec.entry_point)


def base_name_for(base_job_name: object, entry_point: object) -> str:
    """:func:`base_job_name` from a spec's raw fields, before (or without) validating them.

    A ``base_job_name`` that is not a valid name is passed over (validation reports it), as is
    an ``entry_point`` that is not text: the base is then ``job``.
    """
    if isinstance(base_job_name, str) and is_job_name(base_job_name):
        return _trimmed(base_job_name)
    return _trimmed(_base_from_entry_point(entry_point if isinstance(entry_point, str) else ""))


def is_job_name(name: str) -> bool:
    """1-63 letters, digits or hyphens, starting and ending with a letter or digit."""
    return JOB_NAME.match(name) is not None


def _trimmed(base: str) -> str:
    return base[: 63 - _TIMESTAMP_LEN].rstrip("-") or "job"


def _stamped(base: str, when: datetime) -> str:
    stamp = when.strftime("%Y-%m-%d-%H-%M-%S-") + f"{when.microsecond // 1000:03d}"
    return f"{_trimmed(base)}-{stamp}"


class JobNamer:
    """Hands out ``<base>-YYYY-MM-DD-HH-MM-SS-mmm`` names, never the same one twice.

    Each name's millisecond is later than the previous one's (a burst of submissions spreads over
    consecutive milliseconds), and a name for which ``taken`` is true is skipped.
    """

    def __init__(self, taken: Callable[[str], bool]) -> None:
        self._taken = taken
        self._lock = threading.Lock()
        self._last = datetime.min.replace(tzinfo=UTC)

    def name(self, base: str, now: datetime | None = None) -> str:
        """A fresh name for ``base`` (checked like a ``job_name``, field ``base_job_name``)."""
        base = _check(_trimmed(base), "base_job_name")
        with self._lock:
            when = max(now or datetime.now(UTC), self._last + _MS)
            when = when.replace(microsecond=when.microsecond // 1000 * 1000)
            while self._taken(name := _stamped(base, when)):
                when += _MS
            self._last = when
            return name


_MS = timedelta(milliseconds=1)


def _base_from_entry_point(entry_point: str) -> str:
    stem = PurePosixPath(entry_point).stem
    cleaned = re.sub(r"[^A-Za-z0-9]+", "-", stem).strip("-")
    return cleaned or "job"


def check_job_name(name: str) -> str:
    """``name`` if it is a valid job name, else :class:`SpecError` about ``job_name``."""
    return _check(name, "job_name")


def _check(name: str, field: str) -> str:
    if not JOB_NAME.match(name):
        raise SpecError(
            [
                (
                    field,
                    f"{name!r}: must be 1-63 letters, digits or hyphens, starting and ending "
                    "with a letter or digit",
                )
            ]
        )
    return name
