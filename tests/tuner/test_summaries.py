"""The settled trials' summaries kept between describes (``tuner._summaries``): a describe
gives what summarising every row afresh gives, while a trial that can no longer change (settled,
its jobs ended and billed) is summarised once; what it hands out is the caller's own."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from trainops.spec import JobSpec
from trainops.store import MetadataStore, TuningJobRecord, TuningTrialRecord
from trainops.tuner import describe_tuning_job, stored_config, trial_summary
from trainops.tuner._summaries import SummaryCache, final

_CONFIG = {
    "tuning_job_name": "t",
    "strategy": "Random",
    "training_job": {
        "entry_point": "train.py",
        "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}],
    },
    "objective": {"metric_name": "loss", "type": "Minimize"},
    "hyperparameter_ranges": {"x": {"type": "Integer", "min_value": 0, "max_value": 9}},
    "resource_limits": {"max_number_of_training_jobs": 9, "max_parallel_training_jobs": 2},
}
NOW = 1000.0


def _store(path: Path, count: int) -> MetadataStore:
    store = MetadataStore(path / "metadata.db")
    store.create_tuning_job("t", _CONFIG, "file:///code", 1.0)
    for number in range(count):
        name = f"t-{number:03d}"
        store.create_job(
            name=name, spec=JobSpec(entry_point="train.py").view(), code_uri="file:///code",
            output_prefix=f"file:///out/{name}", max_attempts=1, status="InProgress",
            secondary_status="Starting", message="Starting", now=10.0 + number,
        )  # fmt: skip
        store.add_trial(TuningTrialRecord("t", number, name, {"x": number}, "Pending", 1.0))
    return store


def _end(store: MetadataStore, number: int, *, billed: bool = True) -> None:
    """Trial ``number`` Completed; its job ended, and billed unless ``billed`` is False."""
    job = f"t-{number:03d}"
    store.update_job(job, 50.0, status="Completed", training_start_time=20.0)
    if billed:
        store.update_job(job, 50.0, billable_seconds=30)
    store.update_trial(
        "t", number, status="Completed", objective=0.5 - number / 10, intermediate=[0.5],
        retryable=False, end_time=50.0,
    )  # fmt: skip


def _tuning(store: MetadataStore) -> TuningJobRecord:
    found = store.get_tuning_job("t")
    assert found is not None
    return found


def _describe(store: MetadataStore) -> dict[str, Any]:
    tuning = _tuning(store)
    return describe_tuning_job(store, tuning, stored_config(tuning), now=NOW)


def _fresh(store: MetadataStore) -> list[dict[str, Any]]:
    """Every trial summarised from its rows, nothing kept."""
    config = stored_config(_tuning(store))
    return [trial_summary(store, config, t, NOW) for t in store.trials("t")]


def _behind_its_back(path: Path, sql: str) -> None:
    """A row changed as nothing of trainops changes it: shows which rows a describe reads."""
    with sqlite3.connect(path / "metadata.db") as conn:
        conn.execute(sql)


def test_a_describe_is_every_trial_summarised_afresh(tmp_path: Path) -> None:
    store = _store(tmp_path, 4)
    assert _describe(store)["TrainingJobs"] == _fresh(store)
    _end(store, 0)
    _end(store, 2)
    _end(store, 3, billed=False)  # ended, not billed yet: its cost may still move
    described = _describe(store)
    assert described["TrainingJobs"] == _fresh(store)
    assert described["BestTrainingJob"] == _fresh(store)[3]
    _end(store, 1)
    store.update_job("t-003", 60.0, billable_seconds=40)
    described = _describe(store)
    assert described["TrainingJobs"] == _fresh(store)
    assert described["TrainingJobStatusCounters"]["Completed"] == 4
    assert [s["BillableTimeInSeconds"] for s in described["TrainingJobs"]] == [30, 30, 30, 40]


def test_a_final_trial_is_summarised_once_and_the_others_each_time(tmp_path: Path) -> None:
    store = _store(tmp_path, 3)
    _end(store, 0)
    _end(store, 1, billed=False)
    _describe(store)
    _behind_its_back(tmp_path, "UPDATE jobs SET billable_seconds = 99, status = 'Completed'")
    costs = [s["BillableTimeInSeconds"] for s in _describe(store)["TrainingJobs"]]
    assert costs == [30, 99, 99]  # the final one kept; the unbilled and the running read again


def test_final_needs_the_trial_settled_and_its_jobs_ended_and_billed(tmp_path: Path) -> None:
    store = _store(tmp_path, 1)
    trial, job = store.trials("t")[0], store.get_job("t-000")
    assert job is not None and not final(trial, [job])
    _end(store, 0, billed=False)
    trial, job = store.trials("t")[0], store.get_job("t-000")
    assert job is not None and not final(trial, [job])
    store.update_job("t-000", 60.0, billable_seconds=5)
    job = store.get_job("t-000")
    assert job is not None and final(trial, [job])
    store.update_trial("t", 0, status="Failed", retryable=True)
    assert not final(store.trials("t")[0], [job])  # to be tried again


def test_what_a_describe_hands_out_is_the_callers_own(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    _end(store, 0)
    _end(store, 1)
    first = _describe(store)
    first["TrainingJobs"][0]["TunedHyperParameters"]["x"] = "changed"
    first["TrainingJobs"][1]["TrainingJobName"] = "changed"
    first["BestTrainingJob"]["TrainingJobStatus"] = "changed"
    again = _describe(store)
    assert again["TrainingJobs"] == _fresh(store)
    assert again["BestTrainingJob"] == _fresh(store)[1]


def test_tuning_jobs_are_kept_apart_by_store_name_and_creation(tmp_path: Path) -> None:
    cache = SummaryCache(size=1)
    stores = [_store(tmp_path / str(i), 1) for i in range(2)]
    for store in stores:
        _end(store, 0)
    stores[1].update_job("t-000", 60.0, billable_seconds=7)
    seen = []
    for store in [*stores, stores[0]]:  # the second evicts the first (size 1): read again
        _trials, summaries = cache.summarise(
            store, _tuning(store), lambda t, s=store: (_fresh(s)[t.number], _jobs(s, t))
        )
        seen.append(summaries[0]["BillableTimeInSeconds"])
    assert seen == [30, 7, 30]


def _jobs(store: MetadataStore, trial: TuningTrialRecord) -> list[Any]:
    job = store.get_job(trial.training_job)
    return [] if job is None else [job]
