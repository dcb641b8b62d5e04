"""``create_trial``: a trial over a local directory, a storage URI, or a job's debug output.

A bare job name (no ``://``, not an existing path) is looked up in this home's store: its
tensors are under ``<output prefix>/debug-output`` (SageMaker's ``<S3OutputPath>/<job>/
debug-output``), or ``<debugger_hook_config.s3_output_path>/<job>/debug-output`` where the
spec sets one (the SDK's ``latest_job_debugger_artifacts_path``).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from trainops.debugger.trial._source import source_for
from trainops.debugger.trial._trial import Trial, TrialLimits

if TYPE_CHECKING:
    from trainops._settings import Settings

__all__ = ["DEBUG_OUTPUT", "create_trial", "job_debug_prefix"]

DEBUG_OUTPUT = "debug-output"
_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # SageMaker's training job names


def create_trial(
    path: str | os.PathLike[str],
    name: str | None = None,
    range_steps: tuple[int, int | None] | None = None,
    *,
    poll_interval: float = 2.0,
    settings: Settings | None = None,
    limits: TrialLimits | None = None,
) -> Trial:
    """A :class:`Trial` over ``path``: a directory, a ``file://`` or ``s3://`` URI, or the name
    of a job of this home."""
    location = os.fspath(path)
    if _looks_like_job(location):
        location = job_debug_prefix(location, settings)
    return Trial(
        source_for(location, settings),
        name or os.fspath(path),
        range_steps,
        poll_interval=poll_interval,
        limits=limits,
    )


def _looks_like_job(location: str) -> bool:
    if "://" in location or os.path.exists(location):
        return False
    return bool(_JOB_NAME.fullmatch(location))


def job_debug_prefix(job_name: str, settings: Settings | None = None) -> str:
    """Where job ``job_name`` of this home saves its tensors; ``LookupError`` if no such job."""
    from trainops._settings import Settings
    from trainops.storage import join_uri
    from trainops.store import MetadataStore

    settings = settings or Settings.load()
    if not settings.db_path.exists():
        raise LookupError(f"no job named {job_name!r}: {settings.home} has no jobs")
    store = MetadataStore(settings.db_path)
    try:
        job = store.get_job(job_name)
    finally:
        store.close()
    if job is None:
        raise LookupError(f"no job named {job_name!r} in {settings.home}")
    hook = job.spec.debugger_hook_config
    if hook is None:
        return join_uri(job.output_prefix, DEBUG_OUTPUT)
    return hook.output_prefix(job.output_prefix, job.name)  # where the job's agents sync to
