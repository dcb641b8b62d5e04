"""The tuner: a control-plane service that runs tuning jobs as ordinary training jobs.

Each tick (and whenever one of its trials' training jobs ends, or, with an early-stopping rule,
stores new metric points: judged within ~0.1 s, not at the next tick) the tuner *advances*
every running tuning job from the store alone, so a tuner that died at any moment resumes from
where the rows say it was:

1. reconcile each unfinished trial with its training job: a trial recorded but never submitted
   (the tuner died in between) is submitted now under the name its row already holds; a running
   one gets its intermediate objective values (and may be stopped early by the search's rule);
   an ended one takes its status and its last objective, read from the job's scraped metrics.
   A job that failed for an internal reason (a lost host, a server that died) is tried again as
   a new training job of the same trial: same number and hyperparameters, not counted twice;
2. end the tuning job when it was asked to stop, ran out of time, or its search says it is
   complete (every trial run, a target reached, no improvement), once its trials have ended;
   or Failed, as SageMaker's, once 5 trials failed (or all ended, one failed) and none
   succeeded (the failure is written first, then the running trials are stopped);
3. otherwise ask the search (rebuilt from the recorded trials, never pickled) for trials up to
   the parallel limit: each trial's row is written *before* its job is submitted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math

from trainops._errors import SpecError, TrainopsError
from trainops.control import ENDED
from trainops.control.services import ControlService, ServiceContext
from trainops.protocol import toolkit_value
from trainops.spec import JobSpec
from trainops.store import (
    JobExistsError,
    JobRecord,
    MetadataStore,
    TrialExistsError,
    TuningJobRecord,
    TuningTrialRecord,
)
from trainops.tuner._records import (
    MAX_TRIES,
    no_success_reason,
    retry_due,
    search_for,
    stored_config,
    trial_record,
)
from trainops.tuner._settled import SettledTrials
from trainops.tuner._sync import catch_up
from trainops.tuning import OBJECTIVE_HYPERPARAMETER, Search, TuningJobConfig

__all__ = [
    "MAX_RUNTIME",
    "MAX_TRIES",
    "STOP_REQUESTED",
    "TunerService",
    "trial_job_name",
    "trial_spec",
    "tuner_service",
]

_log = logging.getLogger("trainops.tuner")
_PERIOD_S = 0.5
#: A training job that ended with this failure was lost, not wrong: its trial is tried again.
_RETRYABLE_PREFIX = "InternalServerError"
_EARLY_STOP = "Stopped early by the tuner ({rule}): its objective trails the other trials'"
STOP_REQUESTED = "StopRequested"
MAX_RUNTIME = "MaxRuntimeInSecondsReached"


def trial_job_name(tuning: TuningJobRecord, number: int, tries: int = 1) -> str:
    """``<tuning job>-<NNN>-<8 hex>`` (NNN from 001), as SageMaker names a tuning job's
    training jobs; the hex part comes from the tuning job's creation and the try, so it is the
    same after a restart and new for each retry."""
    seed = f"{tuning.name}:{tuning.creation_time!r}:{number}:{tries}"
    return f"{tuning.name}-{number + 1:03d}-{hashlib.sha256(seed.encode()).hexdigest()[:8]}"


class TunerService(ControlService):
    """Advances every running tuning job; the store holds all of its state."""

    name = "tuner"
    period = _PERIOD_S

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.store: MetadataStore = context.store
        # The search of each running tuning job, kept between passes and caught up with the rows
        # (see _sync) rather than rebuilt: a rebuild replays every trial into Optuna (~0.4 ms a
        # trial) and the tuner needs a current search several times per trial.
        self._searches: dict[str, Search] = {}
        self._wrote = False  # whether this pass wrote a trial row (see _reread)
        # Each running tuning job's config as validated once: a stored config never changes,
        # and validating it (a pydantic model with the whole job spec) on every pass cost more
        # than the rest of a pass without news. Keyed by name and creation time, so a job made
        # again under the same name is read afresh.
        self._configs: dict[tuple[str, float], TuningJobConfig] = {}
        # Each running tuning job's settled trials (see _settled), keyed as its config is.
        self._settled: dict[tuple[str, float], SettledTrials] = {}

    def tick(self) -> None:
        running = self.store.list_tuning_jobs(statuses=("InProgress", "Stopping"), limit=1000)
        names = {tuning.name for tuning in running}
        for key in [k for k in self._configs if k[0] not in names]:
            del self._configs[key]  # ended by another hand than this tuner's
        for key in [k for k in self._settled if k[0] not in names]:
            del self._settled[key]
        for tuning in running:
            self.advance(tuning.name)

    def job_changed(self, job: JobRecord) -> None:
        if job.status not in ENDED:
            return  # a running trial's new values come with metrics_stored; an end frees a slot
        trial = self.store.trial_of_job(job.name)
        if trial is not None:
            self.advance(trial.tuning_job)

    def metrics_stored(self, jobs: list[str]) -> None:
        """Trials among ``jobs`` reported new values: advance their tuning jobs now if a rule
        may stop trials early (else the values wait for the tick: nothing acts on them sooner)."""
        tunings: dict[str, None] = {}
        for name in jobs:
            trial = self.store.trial_of_job(name)
            if trial is not None:
                tunings[trial.tuning_job] = None
        for name in tunings:
            tuning = self.store.get_tuning_job(name)
            if tuning is None or tuning.status != "InProgress":
                continue
            try:
                config = self._config(tuning)
            except SpecError:
                continue  # the tick's pass says why and ends it
            if self._stops_early(tuning, config):
                self.advance(name)

    def advance(self, name: str) -> None:
        """Move tuning job ``name`` on as far as its trials allow."""
        tuning = self.store.get_tuning_job(name)
        if tuning is None or tuning.status not in ("InProgress", "Stopping"):
            return
        try:
            config = self._config(tuning)
        except SpecError as exc:  # e.g. written by another trainops: say so, end it
            problems = "; ".join(f"{field}: {why}" for field, why in exc.problems)
            self._fail(tuning, f"its stored config is invalid: {problems}")
            return
        try:
            self._advance(tuning, config)
        except ValueError as exc:  # the search refuses a record (see Search): it would every pass
            self._fail(tuning, f"its trials cannot be replayed: {exc}")

    def _config(self, tuning: TuningJobRecord) -> TuningJobConfig:
        key = (tuning.name, tuning.creation_time)
        config = self._configs.get(key)
        if config is None:
            config = self._configs[key] = stored_config(tuning)
        return config

    def _fail(self, tuning: TuningJobRecord, reason: str) -> None:
        """End the tuning job Failed with ``reason``, stopping its running trials."""
        for trial in self._trials(tuning):
            if not trial.ended:
                self._stop_trial(tuning, trial, f"The tuning job failed: {reason}")
        self._finish(tuning, "Failed", failure=reason)

    def _advance(self, tuning: TuningJobRecord, config: TuningJobConfig) -> None:
        self._wrote = False
        trials = self._trials(tuning)
        for trial in trials:
            if not trial.ended:
                self._reconcile(tuning, config, trial)
        trials = self._reread(tuning, trials)
        if not (tuning.stop_requested or tuning.failure_reason):
            self._retry_lost(tuning, trials)
            trials = self._reread(tuning, trials)
        tuning = self._failing(tuning, config, trials)
        search = self._search(tuning, config, trials)
        running = [t for t in trials if not t.ended]
        reason = self._end_reason(tuning, config, search)
        if reason is None:
            self._launch(tuning, config, search, len(running))
        elif running:
            for trial in running:
                self._stop_trial(tuning, trial, f"The tuning job is ending: {reason}")
        elif tuning.failure_reason:
            self._finish(tuning, "Failed", failure=tuning.failure_reason)
        else:
            status = "Stopped" if reason in (STOP_REQUESTED, MAX_RUNTIME) else "Completed"
            self._finish(tuning, status, reason=reason)

    def _failing(
        self, tuning: TuningJobRecord, config: TuningJobConfig, trials: list[TuningTrialRecord]
    ) -> TuningJobRecord:
        """``tuning``, its failure recorded (while still InProgress) once its trials have failed
        with none succeeding: the record holds the decision, so the trials it then stops (which
        end Stopped) cannot undo it, and a tuner that dies meanwhile finds it made."""
        if tuning.failure_reason or tuning.stop_requested:
            return tuning
        reason = no_success_reason(trials, config.max_training_jobs)
        if reason is None:
            return tuning
        _log.info("tuning job %s fails: %s", tuning.name, reason)
        return self.store.update_tuning_job(tuning.name, self.context.now(), failure_reason=reason)

    # --- 1. reconcile -------------------------------------------------------------------------

    def _reconcile(
        self, tuning: TuningJobRecord, config: TuningJobConfig, trial: TuningTrialRecord
    ) -> None:
        job = self.store.get_job(trial.training_job)
        if job is None:
            if tuning.stop_requested or tuning.failure_reason:
                self._update(trial, status="Stopped", end_time=self.context.now())
            else:
                self._submit(tuning, config, trial)
            return
        values = self._objective_values(job, config)
        if job.status in ENDED:
            self._ended(tuning, trial, job, values)
            return
        if not _continues(trial.intermediate, values):  # a new attempt: its curve starts again
            self._update(trial, intermediate=[], objective=None)
            trial = dataclasses.replace(trial, intermediate=[], objective=None)
        new_values = len(values) > len(trial.intermediate) and not job.stop_reason
        if new_values and self._stops_early(tuning, config):
            self._maybe_stop_early(tuning, config, trial, values)
        changes: dict[str, object] = {}
        if trial.status == "Pending":
            changes["status"] = "InProgress"
        if not _same(values, trial.intermediate):
            changes.update(intermediate=values, objective=values[-1] if values else None)
        if changes:
            self._update(trial, **changes)

    def _objective_values(self, job: JobRecord, config: TuningJobConfig) -> list[float]:
        """The objective metric's values in order, as the first host of the job's current
        attempt reported them (one per epoch for a script that reports each epoch): a job
        retried by its ``retry_strategy`` counts its last attempt, never a mix of attempts."""
        points = self.store.metrics(job.name, config.objective.metric_name, attempt=job.attempt)
        first = min((p.host for p in points), default="")
        return [p.value for p in points if p.host == first]

    def _stops_early(self, tuning: TuningJobRecord, config: TuningJobConfig) -> bool:
        """Whether a rule may stop the trials early (asked of the kept search, so that a job
        without one does not read its rows for it)."""
        kept = self._searches.get(tuning.name)
        return (kept or self._search(tuning, config, self._trials(tuning))).stops_early

    def _maybe_stop_early(
        self,
        tuning: TuningJobRecord,
        config: TuningJobConfig,
        trial: TuningTrialRecord,
        values: list[float],
    ) -> None:
        search = self._search(tuning, config, self._trials(tuning))
        stop = False
        for step in range(len(trial.intermediate) + 1, len(values) + 1):
            stop = search.should_stop(trial.number, step, values[step - 1]) or stop
        if stop:
            rule = config.strategy.value if config.strategy.value == "Hyperband" else "median rule"
            self._stop_trial(tuning, trial, _EARLY_STOP.format(rule=rule))

    def _ended(
        self,
        tuning: TuningJobRecord,
        trial: TuningTrialRecord,
        job: JobRecord,
        values: list[float],
    ) -> None:
        reason = job.failure_reason or ""
        retryable = job.status == "Failed" and reason.startswith(_RETRYABLE_PREFIX)
        self._update(
            trial,
            status=job.status,
            intermediate=values,
            objective=values[-1] if values and job.status != "Failed" else None,
            failure_reason=job.failure_reason,
            retryable=retryable,
            end_time=job.training_end_time or job.last_modified_time,
        )

    def _retry_lost(self, tuning: TuningJobRecord, trials: list[TuningTrialRecord]) -> None:
        """Try again each trial whose job was lost (its next pass submits the new job)."""
        for trial in trials:
            if retry_due(trial):
                next_job = trial_job_name(tuning, trial.number, trial.tries + 1)
                if self.store.retry_trial(tuning.name, trial.number, next_job):
                    self._wrote = True
                    _log.info("tuning job %s: trial %d tried again", tuning.name, trial.number)

    # --- 2. end -------------------------------------------------------------------------------

    def _end_reason(
        self, tuning: TuningJobRecord, config: TuningJobConfig, search: Search
    ) -> str | None:
        if tuning.failure_reason:
            return tuning.failure_reason
        if tuning.stop_requested:
            return STOP_REQUESTED
        limit = config.resource_limits.max_runtime_in_seconds
        if limit is not None and self.context.now() - tuning.creation_time > limit:
            return MAX_RUNTIME
        reason = search.completed()
        return None if reason is None else reason.value

    def _stop_trial(self, tuning: TuningJobRecord, trial: TuningTrialRecord, why: str) -> None:
        job = self.store.get_job(trial.training_job)
        if job is None:  # never submitted: nothing runs
            self._update(trial, status="Stopped", end_time=self.context.now())
        elif job.status not in ENDED:
            self.context.stop_job(trial.training_job, why)

    def _finish(
        self,
        tuning: TuningJobRecord,
        status: str,
        *,
        reason: str | None = None,
        failure: str | None = None,
    ) -> None:
        self._searches.pop(tuning.name, None)
        self._configs.pop((tuning.name, tuning.creation_time), None)
        self._settled.pop((tuning.name, tuning.creation_time), None)
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
        self, tuning: TuningJobRecord, config: TuningJobConfig, search: Search, running: int
    ) -> None:
        while running < config.resource_limits.max_parallel_training_jobs:
            proposal = search.ask()
            if proposal is None:
                return
            trial = TuningTrialRecord(
                tuning_job=tuning.name,
                number=proposal.number,
                training_job=trial_job_name(tuning, proposal.number),
                hyperparameters=dict(proposal.hyperparameters),
                status="Pending",
                creation_time=self.context.now(),
            )
            try:
                self.store.add_trial(trial)
            except TrialExistsError:
                return  # recorded meanwhile: the next pass sees it
            self._submit(tuning, config, trial)
            running += 1

    def _submit(
        self, tuning: TuningJobRecord, config: TuningJobConfig, trial: TuningTrialRecord
    ) -> None:
        submit = self.context.submit_job
        if submit is None:
            return
        problem = None
        try:
            submit(trial.training_job, trial_spec(config, trial), tuning.code_uri)
        except JobExistsError:
            problem = self._not_ours(tuning, trial)  # ours: submitted before the tuner died
        except TrainopsError as exc:
            problem = f"the training job could not be submitted: {exc}"
        if problem is None:
            self._update(trial, status="InProgress")
        else:
            self._update(
                trial, status="Failed", failure_reason=problem, end_time=self.context.now()
            )

    def _not_ours(self, tuning: TuningJobRecord, trial: TuningTrialRecord) -> str | None:
        """Why the existing job named as the trial's is not the trial's (None: it is)."""
        job = self.store.get_job(trial.training_job)
        if (
            job is not None
            and job.code_uri == tuning.code_uri
            and job.creation_time >= trial.creation_time
        ):
            return None
        return (
            f"a training job named {trial.training_job} exists that this tuning job did not submit"
        )

    def _search(
        self, tuning: TuningJobRecord, config: TuningJobConfig, trials: list[TuningTrialRecord]
    ) -> Search:
        """The search as of ``trials``: the kept one caught up with them, else rebuilt."""
        records = [trial_record(t) for t in trials]
        kept = self._searches.get(tuning.name)
        if kept is not None and catch_up(kept, records):
            return kept
        search = search_for(self.store, tuning, config, trials)
        self._searches[tuning.name] = search
        return search

    def _trials(self, tuning: TuningJobRecord) -> list[TuningTrialRecord]:
        """Every trial of ``tuning``, by number: its settled ones as held, the rest read."""
        key = (tuning.name, tuning.creation_time)
        held = self._settled.get(key)
        if held is None:
            held = self._settled[key] = SettledTrials()
        return held.read(self.store, tuning.name)

    def _update(self, trial: TuningTrialRecord, **changes: object) -> None:
        self.store.update_trial(trial.tuning_job, trial.number, **changes)
        self._wrote = True

    def _reread(
        self, tuning: TuningJobRecord, trials: list[TuningTrialRecord]
    ) -> list[TuningTrialRecord]:
        """``trials`` read again if this pass wrote a trial row since (reading every row is
        the pass's largest cost: ~0.1 ms a trial)."""
        if not self._wrote:
            return trials
        self._wrote = False
        return self._trials(tuning)


def _same(a: list[float], b: list[float]) -> bool:
    """Equal curves, a NaN (a diverged trial's value) equal to a NaN."""
    return len(a) == len(b) and _continues(a, b)


def _continues(known: list[float], values: list[float]) -> bool:
    """Whether ``values`` begin with ``known`` (NaN matching NaN)."""
    if len(values) < len(known):
        return False
    head = values[: len(known)]
    return all(
        k == v or (math.isnan(k) and math.isnan(v)) for k, v in zip(known, head, strict=True)
    )


def trial_spec(config: TuningJobConfig, trial: TuningTrialRecord) -> JobSpec:
    """The training job of one trial: the config's job with the static hyperparameters
    (Hyperband's resource at its maximum), the tuned ones, and the objective's name (reserved:
    only the platform sets it, so the validated spec is copied, not validated again).

    A Categorical value is text on SageMaker's wire, and reaches the script as the training
    toolkit reads that text: ``"\\"32\\""`` (how the SageMaker SDK sends a framework
    estimator's ``CategoricalParameter([32, 64])``) as the string 32, ``32`` as the number,
    ``adam`` as itself. The values stay as declared everywhere the API gives them back
    (TunedHyperParameters, the trial's DescribeTrainingJob)."""
    tuned = {
        name: toolkit_value(value) if isinstance(value, str) else value
        for name, value in trial.hyperparameters.items()
    }
    values = {**config.static_hyperparameters, **tuned}
    values[OBJECTIVE_HYPERPARAMETER] = config.objective.metric_name
    return config.training_job.model_copy(update={"hyperparameters": values, "job_name": None})


def tuner_service(context: ServiceContext) -> TunerService:
    """The factory the service table holds."""
    return TunerService(context)
