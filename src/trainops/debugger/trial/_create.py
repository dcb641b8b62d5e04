"""``create_trial``: a trial over a local directory, a storage URI, or a job's debug output."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from trainops.debugger.trial._source import source_for
from trainops.debugger.trial._trial import Trial

if TYPE_CHECKING:
    from trainops._settings import Settings

__all__ = ["create_trial"]


def create_trial(
    path: str | os.PathLike[str],
    name: str | None = None,
    range_steps: tuple[int, int | None] | None = None,
    *,
    poll_interval: float = 2.0,
    settings: Settings | None = None,
) -> Trial:
    """A :class:`Trial` over ``path``: a directory, ``file://`` or ``s3://`` URI."""
    location = os.fspath(path)
    return Trial(source_for(location, settings), name, range_steps, poll_interval=poll_interval)
