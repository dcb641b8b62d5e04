"""A tuning job's trials as the analysis reads them, gathered from the store: each trial's
cost (every training job it took, at the catalog price: ``trainops.cost.job_cost``), its steps
and pace, and whether the search's rule stopped it early. The analysis itself is the tuning
library's (``trainops.tuning.analysis``)."""

from __future__ import annotations

import time

from trainops.cost import job_cost
from trainops.store import JobRecord, MetadataStore, TuningJobRecord, TuningTrialRecord
from trainops.tuner._records import trial_record
from trainops.tuning import TuningJobConfig
from trainops.tuning.analysis import TrialFacts, TuningAnalysis, analyse

__all__ = ["EARLY_STOP_PREFIX", "analyse_tuning_job", "trial_cost", "trial_facts"]

#: How the tuner's stop message of a trial stopped by the search's rule begins (``_service``).
EARLY_STOP_PREFIX = "Stopped early by the tuner"


def trial_jobs(store: MetadataStore, trial: TuningTrialRecord) -> list[JobRecord]:
    """Every training job the trial took that exists: its earlier tries, then its current one."""
    names = [str(e.get("name")) for e in trial.earlier_jobs] + [trial.training_job]
    return [job for name in names if (job := store.get_job(name)) is not None]


def trial_cost(jobs: list[JobRecord], now: float) -> tuple[float, float]:
    """The billed seconds and the cost of a trial's training jobs as of ``now``."""
    costs = [job_cost(job, now) for job in jobs]
    return sum(c.seconds for c in costs), sum(c.usd for c in costs)


def _early_stopped(store: MetadataStore, trial: TuningTrialRecord) -> bool:
    if trial.status != "Stopped":
        return False
    return any(
        t.message.startswith(EARLY_STOP_PREFIX) for t in store.transitions(trial.training_job)
    )


def _pace(store: MetadataStore, job: JobRecord, metric: str) -> float | None:
    """Seconds per objective value between the first and the last the job's first host sent."""
    points = store.metrics(job.name, metric, attempt=job.attempt)
    first = min((p.host for p in points), default="")
    stamps = sorted(p.ts for p in points if p.host == first)
    if len(stamps) < 2:
        return None
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1)


def trial_facts(
    store: MetadataStore, config: TuningJobConfig, trial: TuningTrialRecord, now: float
) -> TrialFacts:
    """What the analysis needs of one trial."""
    from trainops.tuner._describe import training_status

    jobs = trial_jobs(store, trial)
    seconds, usd = trial_cost(jobs, now)
    current = jobs[-1] if jobs and jobs[-1].name == trial.training_job else None
    rate = job_cost(current, now) if current is not None else None
    return TrialFacts(
        number=trial.number,
        training_job=trial.training_job,
        status=training_status(trial),
        hyperparameters=dict(trial.hyperparameters),
        objective=trial_record(trial).counted_objective,
        steps=len(trial.intermediate),
        early_stopped=_early_stopped(store, trial),
        seconds=seconds,
        cost_usd=usd,
        usd_per_second=0.0 if rate is None else rate.usd_per_hour * rate.instance_count / 3600,
        seconds_per_step=(
            None if current is None else _pace(store, current, config.objective.metric_name)
        ),
        earlier_jobs=tuple(str(e.get("name")) for e in trial.earlier_jobs),
    )


def analyse_tuning_job(
    store: MetadataStore,
    tuning: TuningJobRecord,
    config: TuningJobConfig,
    now: float | None = None,
) -> TuningAnalysis:
    """The analysis of ``tuning`` from its trials as the store holds them now."""
    from trainops.catalog import load_catalog

    moment = time.time() if now is None else now
    facts = [trial_facts(store, config, t, moment) for t in store.trials(tuning.name)]
    return analyse(tuning.name, config, facts, currency=load_catalog().currency)
