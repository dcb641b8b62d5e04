"""The tuning routes: create, list, describe and stop tuning jobs, and their best trial.

The tuner and the tuning library are imported by the handlers that need them, not with the routes
(every control plane builds the routes; few see a tuning job). A tuning job is declared as JSON (the tuning YAML read as data) plus the trials' uploaded code;
the declaration is checked before anything is recorded, so an invalid one is a 422 naming each
field. The tuner service (``trainops.tuner``) runs it from the store; a stop marks it Stopping
and the tuner stops its running trials.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from trainops import tuner
from trainops._errors import TUNING_JOB, JobNotFoundError, SpecError
from trainops.control import JobController, JobEndedError
from trainops.server._routing import Operation, Param
from trainops.server.routes._shapes import API, STRING, json_object
from trainops.store import TuningJobRecord

if TYPE_CHECKING:
    from trainops.tuning import TuningJobConfig

__all__ = ["TuningRequest", "TuningRoutes"]

_STATUSES = ("InProgress", "Stopping", "Completed", "Stopped", "Failed")
_TUNING = json_object(
    "HyperParameterTuningJobName",
    "HyperParameterTuningJobStatus",
    HyperParameterTuningJobName=STRING,
    HyperParameterTuningJobStatus={"type": "string", "enum": list(_STATUSES)},
)
_DESCRIBED = _TUNING | {
    "description": "the tuning job, with the keys of DescribeHyperParameterTuningJob"
}


class TuningRequest(BaseModel):
    """A tuning job to run: its declaration (``docs/tuning.md``) and the trials' code."""

    config: dict[str, Any] = Field(description="the tuning job's declaration, as JSON")
    code_uri: str = Field(description="URI of the packed source directory (sourcedir.tar.gz)")


class TuningRoutes:
    """The tuning jobs of ``controller``'s store."""

    def __init__(self, controller: JobController) -> None:
        self.controller = controller
        self.store = controller.store

    def create(
        self,
        body: TuningRequest,
        with_tuning: Callable[[TuningJobRecord], None] | None = None,
    ) -> dict[str, Any]:
        """Record a tuning job; the tuner starts its first trials within a second.
        ``with_tuning`` runs inside the transaction that records it: what it writes to the
        store is kept with the tuning job or, if it raises, neither is."""
        from trainops.tuning import TuningJobConfig

        config = TuningJobConfig(**body.config)
        name = config.tuning_job_name
        if name is None:
            problem = ("tuning_job_name", "required here (the CLI and SDK make one)")
            raise SpecError([problem], subject=TUNING_JOB)
        self._check_parents(config)
        try:
            self.controller.check_code(body.code_uri)
        except SpecError as exc:  # the request's code_uri: a refusal of this tuning job
            raise SpecError(exc.problems, subject=TUNING_JOB) from None
        stored = config.model_dump(mode="json", exclude_none=True)
        with self.store.transaction():
            tuning = self.store.create_tuning_job(name, stored, body.code_uri, time.time())
            if with_tuning is not None:
                with_tuning(tuning)
        return tuner.describe_tuning_job(self.store, tuning, config)

    def _check_parents(self, config: TuningJobConfig) -> None:
        """Warm start's parents must exist, have ended, and keep SageMaker's rules against this
        job (the objective, the hyperparameters' count and types; for IdenticalDataAndAlgorithm
        the data and the code: ``check_warm_start``)."""
        from trainops.tuning import check_warm_start

        warm = config.warm_start_config
        parents: dict[str, TuningJobConfig] = {}
        for index, parent in enumerate([] if warm is None else warm.parents):
            found = self.store.get_tuning_job(parent)
            field = f"warm_start_config.parents.{index}"
            if found is None:
                raise SpecError([(field, f"no tuning job named {parent!r}")], subject=TUNING_JOB)
            if found.status not in ("Completed", "Stopped", "Failed"):
                why = f"{parent!r} is {found.status}: wait until it ends"
                raise SpecError([(field, why)], subject=TUNING_JOB)
            try:
                parents[parent] = tuner.stored_config(found)
            except SpecError:
                why = f"{parent!r}: its stored config is no longer valid; name another parent"
                raise SpecError([(field, why)], subject=TUNING_JOB) from None
        check_warm_start(config, parents)

    def list_tuning_jobs(self, status: list[str] | None, limit: int) -> dict[str, Any]:
        found = self.store.list_tuning_jobs(statuses=status or [], limit=limit)
        return {"tuning_jobs": [tuner.tuning_summary(t) for t in found]}

    def describe(self, name: str) -> dict[str, Any]:
        tuning = self._tuning(name)
        return tuner.describe_tuning_job(self.store, tuning, tuner.stored_config(tuning))

    def best(self, name: str) -> dict[str, Any]:
        """The trial with the best final objective (404 while none has one)."""
        tuning = self._tuning(name)
        config = tuner.stored_config(tuning)
        best = tuner.best_trial(config, self.store.trials(name))
        if best is None:
            raise JobNotFoundError(f"tuning job {name!r} has no trial with an objective yet")
        return tuner.trial_summary(self.store, config, best)

    def analysis(self, name: str) -> dict[str, Any]:
        """The tuning job's report as data: objective per trial and best so far, slices,
        parameter importance, each trial's cost and the total, compute saved by early stopping
        (``trainops tuning report`` draws it; docs/tuning-jobs.md)."""
        tuning = self._tuning(name)
        found = tuner.analyse_tuning_job(self.store, tuning, tuner.stored_config(tuning))
        return found.to_json()

    def stop(self, name: str) -> dict[str, Any]:
        """Stop the tuning job: its running trials are stopped, it ends Stopped."""
        tuning = self._tuning(name)
        if not self.store.request_tuning_stop(name, time.time()):
            ended = self._tuning(name).status
            raise JobEndedError(f"tuning job {name!r} has already ended ({ended})")
        tuning = self._tuning(name)
        return tuner.describe_tuning_job(self.store, tuning, tuner.stored_config(tuning))

    def _tuning(self, name: str) -> TuningJobRecord:
        tuning = self.store.get_tuning_job(name)
        if tuning is None:
            raise JobNotFoundError(f"no tuning job named {name!r}")
        return tuning

    def operations(self) -> list[Operation]:
        """``POST /tuning-jobs``, ``GET /tuning-jobs``, ``GET /tuning-jobs/{name}``,
        ``GET /tuning-jobs/{name}/best``, ``GET /tuning-jobs/{name}/analysis`` and ``POST /tuning-jobs/{name}/stop``."""
        path = f"{API}/tuning-jobs"
        return [
            Operation("POST", path, self.create, body=TuningRequest, max_body=4 * 1024 * 1024,
                      status=201, errors=(400, 409, 422), auth="token", returns=_DESCRIBED),
            Operation("GET", path, self.list_tuning_jobs, params=_LIST_PARAMS, errors=(400,),
                      auth="token", description="The tuning jobs, newest first.",
                      returns=json_object("tuning_jobs",
                                          tuning_jobs={"type": "array", "items": _TUNING})),
            Operation("GET", f"{path}/{{name}}", self.describe, errors=(404,), auth="token",
                      returns=_DESCRIBED),
            Operation("GET", f"{path}/{{name}}/best", self.best, errors=(404,), auth="token",
                      returns=json_object("TrainingJobName", TrainingJobName=STRING)),
            Operation("GET", f"{path}/{{name}}/analysis", self.analysis, errors=(404,),
                      auth="token", returns=json_object("name", "trials", name=STRING)),
            Operation("POST", f"{path}/{{name}}/stop", self.stop, status=202,
                      errors=(404, 409), auth="token", returns=_DESCRIBED),
        ]  # fmt: skip


_LIST_PARAMS = (
    Param("status", "array", choices=_STATUSES, description="only tuning jobs in these"),
    Param("limit", "integer", default=50, ge=1, le=1000, description="at most this many"),
)
