"""Retention of job trees: the newest ended jobs keep their directories, older ones lose them.

Each job's hosts work under ``jobs/<job>/`` where their agents run (``attempt-<n>/<host>/`` trees with
the code, the downloaded channels, the model and output before upload, and ``.agents/`` with each
agent's journal, log and per-job Python environment). Everything there that matters outlives the
job elsewhere (artifacts and logs in object storage, logs, metrics and history in the store), so
the directories of ended jobs are only kept for looking into recent jobs: the newest
``ControlSettings.keep_job_trees`` ended jobs (by end time) keep theirs, the others are deleted. A job
is never touched while it is running or stopping, nor while any of its agents has not reported
its exit, and directories that name no job in the store are left alone. The backend lists and
removes the trees (``Backend.job_trees``, ``Backend.remove_job_tree``): they are on its machines.
"""

from __future__ import annotations

import logging

from trainops.control._core import ControlCore
from trainops.control._status import ENDED
from trainops.store import JobRecord

__all__ = ["TreeRetention"]

_log = logging.getLogger("trainops.control")


class TreeRetention:
    """Deletes the job directories of ended jobs beyond the newest ``keep_job_trees``."""

    def __init__(self, core: ControlCore) -> None:
        self.core = core

    def sweep(self) -> list[str]:
        """Delete what the policy allows now; returns the names of the jobs whose trees went."""
        backend = self.core.backend
        with self.core.lock:
            found = (self.core.store.get_job(name) for name in backend.job_trees())
            ended = [job for job in found if job is not None and self._finished(job)]
        ended.sort(key=_end_time, reverse=True)
        removed = []
        for job in ended[self.core.settings.control.keep_job_trees :]:
            if backend.remove_job_tree(job.name):
                _log.info("removed the job tree of %s (ended %s)", job.name, job.status)
                removed.append(job.name)
            else:
                _log.warning("could not remove the job tree of %s", job.name)
        return removed

    def _finished(self, job: JobRecord) -> bool:
        if job.status not in ENDED:
            return False
        attempts = range(1, job.attempt + 1)
        return all(h.exited for a in attempts for h in self.core.store.hosts(job.name, a))


def _end_time(job: JobRecord) -> float:
    return job.training_end_time or job.last_modified_time
