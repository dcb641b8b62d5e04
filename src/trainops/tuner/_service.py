"""The tuner: a control-plane service that runs tuning jobs as ordinary training jobs.

Each tick (and whenever one of its trials' training jobs changes) the tuner *advances* every
running tuning job from the store alone, so a tuner that died at any moment resumes from where
the rows say it was:

1. reconcile each unfinished trial with its training job: a trial recorded but never submitted
   (the tuner died in between) is submitted now under the name its row already holds; a running
   one gets its intermediate objective values (and may be stopped early); an ended one takes
   its status and its last objective, read from the job's scraped metrics. A job that failed for
   an internal reason (a lost host, a server that died) is retried as a new trial with the same
   hyperparameters that does not count against the maximum;
2. end the tuning job when it was asked to stop, reached its maximum or a completion criterion,
   once its running trials have ended;
3. otherwise ask the search (rebuilt from the recorded trials) for trials up to the parallel
   limit: each trial's row is written *before* its job is submitted.
"""

from __future__ import annotations

import hashlib
import logging

from trainops._errors import TrainopsError
from trainops.control import ENDED
from trainops.control.services import ControlService, ServiceContext
from trainops.store import (
    JobExistsError,
    JobRecord,
    TrialExistsError,
    TuningJobRecord,
    TuningTrialRecord,
)
from trainops.tuner._standin import RandomSearch, TrialView, TuningPlan, parse_plan

__all__ = ["TunerService", "trial_job_name", "tuner_service"]

_log = logging.getLogger("trainops.tuner")
_PERIOD_S = 0.5
#: A training job that ended with this failure prefix was lost, not wrong: it is retried.
_RETRYABLE_PREFIX = "InternalServerError"
#: How many times one proposal is retried after such failures before it counts as failed.
MAX_RETRIES = 2
_EARLY_STOP = "Stopped early by the tuner: its objective is worse than the median of the others"


def trial_job_name(tuning: TuningJobRecord, number: int) -> str:
    """``<tuning job>-<NNN>-<8 hex>``, as SageMaker names a tuning job's training jobs; the hex
    part comes from the tuning job's creation, so it is the same after a restart."""
    digest = hashlib.sha256(f"{tuning.name}:{tuning.creation_time!r}".encode()).hexdigest()
    return f"{tuning.name}-{number:03d}-{digest[:8]}"


class TunerService(ControlService):
    """Advances every running tuning job; the store holds all of its state."""

    name = "tuner"
    period = _PERIOD_S

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.store = context.store

    def tick(self) -> None:
        for tuning in self.store.list_tuning_jobs(statuses=("InProgress", "Stopping"), limit=1000):
            self.advance(tuning.name)

    def job_changed(self, job: JobRecord) -> None:
        trial = self.store.trial_of_job(job.name)
        if trial is not None:
            self.advance(trial.tuning_job)

    def advance(self, name: str) -> None:
        """Move tuning job ``name`` on as far as its trials allow."""
        tuning = self.store.get_tuning_job(name)
        if tuning is None or tuning.status not in ("InProgress", "Stopping"):
            return
        try:
            plan = parse_plan(tuning.config)
        except TrainopsError as exc:  # a declaration a newer trainops wrote: say so, end it
            self._finish(tuning, "Failed", failure=f"the stored declaration is invalid: {exc}")
            return
        for trial in self.store.trials(name):
            if not trial.ended:
                self._reconcile(tuning, plan, trial)
        trials = self.store.trials(name)
        running = [t for t in trials if not t.ended]
        reason = self._end_reason(tuning, plan, trials)
        if reason is None:
            self._launch(tuning, plan, trials, len(running))
        elif running:
            for trial in running:
                self.context.stop_job(trial.training_job, f"The tuning job is ending: {reason}")
        else:
            status = "Stopped" if tuning.stop_requested else "Completed"
            self._finish(tuning, status, reason=reason)

    # --- 1. reconcile -------------------------------------------------------------------------

    def _reconcile(
        self, tuning: TuningJobRecord, plan: TuningPlan, trial: TuningTrialRecord
    ) -> None:
        job = self.store.get_job(trial.training_job)
        if job is None and tuning.stop_requested:
            self.store.update_trial(
                tuning.name, trial.number, status="Stopped", end_time=self.context.now()
            )
            return
        if job is None:
            self._submit(tuning, plan, trial)
            return
        values = [p.value for p in self.store.metrics(job.name, plan.objective.metric_name)]
        if job.status in ENDED:
            self._ended(tuning, trial, job, values)
            return
        changes: dict[str, object] = {}
        if trial.status == "Pending":
            changes["status"] = "InProgress"
        if values != trial.intermediate:
            changes.update(intermediate=values, objective=values[-1])
        if changes:
            self.store.update_trial(tuning.name, trial.number, **changes)
        if values and values != trial.intermediate and not job.stop_reason:
            self._maybe_stop_early(tuning, plan, trial, values)

    def _maybe_stop_early(
        self,
        tuning: TuningJobRecord,
        plan: TuningPlan,
        trial: TuningTrialRecord,
        values: list[float],
    ) -> None:
        search = _search(plan, self.store.trials(tuning.name))
        if search.should_stop(trial.number, len(values) - 1, values[-1]):
            self.context.stop_job(trial.training_job, _EARLY_STOP)

    def _ended(
        self, tuning: TuningJobRecord, trial: TuningTrialRecord, job: JobRecord, values: list[float]
    ) -> None:
        retryable = job.status == "Failed" and (job.failure_reason or "").startswith(
            _RETRYABLE_PREFIX
        )
        self.store.update_trial(
            tuning.name,
            trial.number,
            status=job.status,
            intermediate=values,
            objective=values[-1] if values else None,
            failure_reason=job.failure_reason,
            retryable=retryable,
            end_time=job.training_end_time or job.last_modified_time,
        )
        if retryable and not tuning.stop_requested and _retries(trial, tuning, self) < MAX_RETRIES:
            self._retry(tuning, trial)

    def _retry(self, tuning: TuningJobRecord, trial: TuningTrialRecord) -> None:
        number = max(t.number for t in self.store.trials(tuning.name)) + 1
        retry = TuningTrialRecord(
            tuning_job=tuning.name,
            number=number,
            training_job=trial_job_name(tuning, number),
            hyperparameters=trial.hyperparameters,
            status="Pending",
            creation_time=self.context.now(),
            retry_of=trial.number,
        )
        try:
            self.store.add_trial(retry)
        except TrialExistsError:
            return  # another pass made it
        _log.info("tuning job %s: trial %d retried as %d", tuning.name, trial.number, number)

    # --- 2. end -------------------------------------------------------------------------------

    def _end_reason(
        self, tuning: TuningJobRecord, plan: TuningPlan, trials: list[TuningTrialRecord]
    ) -> str | None:
        if tuning.stop_requested:
            return "Stop requested by the user"
        counted = sum(1 for t in trials if t.counted)
        if counted >= plan.max_number_of_training_jobs and all(t.ended for t in trials):
            return "MaxNumberOfTrainingJobs reached"
        search = _search(plan, trials)
        return search.completed([_view(t) for t in trials])

    def _finish(
        self,
        tuning: TuningJobRecord,
        status: str,
        *,
        reason: str | None = None,
        failure: str | None = None,
    ) -> None:
        now = self.context.now()
        self.store.update_tuning_job(
            tuning.name,
            now,
            status=status,
            end_time=now,
            completion_reason=reason,
            failure_reason=failure,
        )
        _log.info("tuning job %s ended %s: %s", tuning.name, status, reason or failure)

    # --- 3. launch ----------------------------------------------------------------------------

    def _launch(
        self,
        tuning: TuningJobRecord,
        plan: TuningPlan,
        trials: list[TuningTrialRecord],
        running: int,
    ) -> None:
        search = _search(plan, trials)
        while running < plan.max_parallel_training_jobs:
            proposal = search.ask()
            if proposal is None:
                return
            trial = TuningTrialRecord(
                tuning_job=tuning.name,
                number=proposal.number,
                training_job=trial_job_name(tuning, proposal.number),
                hyperparameters=proposal.hyperparameters,
                status="Pending",
                creation_time=self.context.now(),
            )
            try:
                self.store.add_trial(trial)
            except TrialExistsError:
                return  # recorded meanwhile: the next pass sees it
            self._submit(tuning, plan, trial)
            running += 1

    def _submit(self, tuning: TuningJobRecord, plan: TuningPlan, trial: TuningTrialRecord) -> None:
        submit = self.context.submit_job
        if submit is None:
            return
        try:
            submit(trial.training_job, plan.job_spec(trial.hyperparameters), tuning.code_uri)
        except JobExistsError:
            pass  # submitted before the tuner died: the next pass reconciles it
        except TrainopsError as exc:
            self.store.update_trial(
                tuning.name,
                trial.number,
                status="Failed",
                failure_reason=f"the training job could not be submitted: {exc}",
                end_time=self.context.now(),
            )
            return
        self.store.update_trial(tuning.name, trial.number, status="InProgress")


def _retries(trial: TuningTrialRecord, tuning: TuningJobRecord, tuner: TunerService) -> int:
    """How many retries led to ``trial`` (0 for a proposal's first try)."""
    by_number = {t.number: t for t in tuner.store.trials(tuning.name)}
    count, current = 0, trial
    while current.retry_of is not None and current.retry_of in by_number:
        count, current = count + 1, by_number[current.retry_of]
    return count


def _view(trial: TuningTrialRecord) -> TrialView:
    return TrialView(
        trial.number,
        trial.hyperparameters,
        trial.status,
        trial.objective,
        trial.intermediate,
        trial.counted,
    )


def _search(plan: TuningPlan, trials: list[TuningTrialRecord]) -> RandomSearch:
    """The search, rebuilt from the recorded trials (retries are replays, not proposals)."""
    search = RandomSearch(plan, [_view(t) for t in trials])
    for trial in trials:
        if trial.ended:
            search.tell(trial.number, trial.status, trial.objective)
    return search


def tuner_service(context: ServiceContext) -> TunerService:
    """The factory the service table holds."""
    return TunerService(context)
