"""The ``tuner`` service as the control plane registers it: a light hook that loads the tuner
(and with it the tuning library: pydantic models, Optuna's glue) only once a tuning job exists.

Every ``trainops run`` starts a control plane; one that never sees a tuning job must not pay for
importing the tuner (about 0.1 s). The hook asks the store one indexed question per tick until
then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.control.services import ControlService, ServiceContext
from trainops.store import JobRecord

if TYPE_CHECKING:
    from trainops.tuner._service import TunerService

__all__ = ["METRICS_GAP_S", "TunerHook", "tuner_hook"]

#: At most this often (seconds) the tuner judges the running trials that reported new values.
METRICS_GAP_S = 0.1

_ACTIVE = ("InProgress", "Stopping")


class TunerHook(ControlService):
    """Hands ticks and job changes to the tuner, loading it when there is something to tune."""

    name = "tuner"
    period = 0.5
    metrics_gap = METRICS_GAP_S

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self._tuner: TunerService | None = None

    def tick(self) -> None:
        tuner = self._loaded(lambda: bool(self.context.store.list_tuning_jobs(
            statuses=_ACTIVE, limit=1)))  # fmt: skip
        if tuner is not None:
            tuner.tick()

    def job_changed(self, job: JobRecord) -> None:
        tuner = self._loaded(lambda: self.context.store.trial_of_job(job.name) is not None)
        if tuner is not None:
            tuner.job_changed(job)

    def metrics_stored(self, jobs: list[str]) -> None:
        if self._tuner is not None:  # else no tuning job runs, so none of these is a trial
            self._tuner.metrics_stored(jobs)

    def _loaded(self, needed: object) -> TunerService | None:
        if self._tuner is None and callable(needed) and needed():
            from trainops.tuner._service import TunerService

            self._tuner = TunerService(self.context)
        return self._tuner


def tuner_hook(context: ServiceContext) -> TunerHook:
    """The factory the service table holds."""
    return TunerHook(context)
