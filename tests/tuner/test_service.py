"""The tuner inside a real control plane (fake agents as real processes): trials are training jobs
run up to the parallel limit, their objective is the job's last reported metric, a stop stops
them, a lost trial is retried without counting, and a control plane that dies resumes the tuning
job with every trial run exactly once."""

from __future__ import annotations

from typing import Any

from tests.control._harness import ControlPlane, control_plane, wait_for
from trainops._settings import Settings
from trainops.store import JobRecord, MetadataStore
from trainops.tuner import MAX_TRIES, search_for, stored_config
from trainops.tuning import Search, TuningJobConfig

_LOSS = [{"name": "loss", "regex": "loss=([0-9.]+)"}]
_ENDED = ("Completed", "Stopped", "Failed")


def tuning_config(
    name: str = "tiny", jobs: int = 4, parallel: int = 2, strategy: str = "Random", **env: str
) -> dict[str, Any]:
    return {
        "tuning_job_name": name,
        "strategy": strategy,
        "training_job": {
            "entry_point": "train.py",
            "instance_type": "ml.m5.large",
            "hyperparameters": {"epochs": 3},
            "metric_definitions": _LOSS,
            "environment": {"FAKE_LINES": "3", "FAKE_LINE_DELAY": "0.1", **env},
        },
        "objective": {"type": "Minimize", "metric_name": "loss"},
        "hyperparameter_ranges": {
            "lr": {
                "type": "Continuous",
                "min_value": 0.001,
                "max_value": 0.1,
                "scaling_type": "Logarithmic",
            },
            "optimizer": ["sgd", "adam"],
        },
        "resource_limits": {
            "max_number_of_training_jobs": jobs,
            "max_parallel_training_jobs": parallel,
        },
        "random_seed": 7,
    }


def create(plane: ControlPlane, config: dict[str, Any]) -> dict[str, Any]:
    body = {"config": config, "code_uri": plane.code_uri}
    response = plane.client.post("/api/v1/tuning-jobs", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


def describe(plane: ControlPlane, name: str) -> dict[str, Any]:
    response = plane.client.get(f"/api/v1/tuning-jobs/{name}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def wait_tuning(plane: ControlPlane, name: str, *statuses: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        described = describe(plane, name)
        return described if described["HyperParameterTuningJobStatus"] in statuses else None

    return wait_for(reached, 120, f"tuning job {name} in {statuses}")


def trial_jobs(store: MetadataStore, name: str) -> list[JobRecord]:
    return [j for j in store.list_jobs(limit=1000) if j.name.startswith(f"{name}-")]


def most_at_once(jobs: list[JobRecord]) -> int:
    """The most trial jobs that existed unended at one moment (from their recorded times)."""
    spans = [(j.creation_time, j.last_modified_time) for j in jobs]
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)


def test_trials_run_as_training_jobs_up_to_the_parallel_limit(settings: Settings) -> None:
    with control_plane(settings) as plane:
        created = create(plane, tuning_config(jobs=5, parallel=2))
        assert created["HyperParameterTuningJobStatus"] == "InProgress"
        done = wait_tuning(plane, "tiny", "Completed")
        store = plane.server.controller.store
        jobs = trial_jobs(store, "tiny")
    assert len(jobs) == 5 and all(j.status == "Completed" for j in jobs)
    assert most_at_once(jobs) == 2
    assert done["TrainingJobStatusCounters"] == {
        "Completed": 5, "InProgress": 0, "RetryableError": 0, "NonRetryableError": 0, "Stopped": 0,
    }  # fmt: skip
    assert done["ObjectiveStatusCounters"] == {"Succeeded": 5, "Pending": 0, "Failed": 0}
    assert done["CompletionReason"] == "MaxNumberOfTrainingJobsReached"
    first = done["TrainingJobs"][0]
    assert first["TrainingJobName"].startswith("tiny-001-")
    # The objective is the job's last reported loss (the fake agent's 1 / (i + 1), i = 0..2).
    assert first["FinalHyperParameterTuningJobObjectiveMetric"] == {
        "Type": "Minimize", "MetricName": "loss", "Value": 1 / 3,
    }  # fmt: skip
    job = next(j for j in jobs if j.name == first["TrainingJobName"])
    hyperparameters = job.spec.hyperparameters
    assert hyperparameters["_tuning_objective_metric"] == "loss"
    assert hyperparameters["epochs"] == 3
    # Typed in the spec (a number's JSON is its text, as SageMaker writes it), strings described.
    tuned = first["TunedHyperParameters"]
    assert isinstance(hyperparameters["lr"], float) and repr(hyperparameters["lr"]) == tuned["lr"]
    assert hyperparameters["optimizer"] == tuned["optimizer"] in ("sgd", "adam")
    assert done["BestTrainingJob"]["ObjectiveStatus"] == "Succeeded"


def test_a_stop_stops_the_running_trials_and_starts_no_more(settings: Settings) -> None:
    with control_plane(settings) as plane:
        create(plane, tuning_config(jobs=6, parallel=2, FAKE_HANG_ATTEMPTS="1"))
        wait_for(
            lambda: describe(plane, "tiny")["TrainingJobStatusCounters"]["InProgress"] == 2,
            60,
            "two trials running",
        )
        stopped = plane.client.post("/api/v1/tuning-jobs/tiny/stop")
        assert stopped.status_code == 202, stopped.text
        done = wait_tuning(plane, "tiny", "Stopped")
        again = plane.client.post("/api/v1/tuning-jobs/tiny/stop")
        jobs = trial_jobs(plane.server.controller.store, "tiny")
    assert again.status_code == 409 and "already ended (Stopped)" in again.text
    assert len(jobs) == 2 and all(j.status == "Stopped" for j in jobs)
    assert done["TrainingJobStatusCounters"]["Stopped"] == 2
    assert done["CompletionReason"] == "StopRequested"


def test_a_lost_trial_is_tried_again_as_the_same_trial(settings: Settings) -> None:
    # Every try reports an internal error: the one trial takes MAX_TRIES (3) training jobs.
    with control_plane(settings) as plane:
        create(plane, tuning_config(jobs=1, parallel=1, FAKE_INTERNAL_ATTEMPTS="1"))
        done = wait_tuning(plane, "tiny", "Completed", "Failed")
        jobs = trial_jobs(plane.server.controller.store, "tiny")
    (trial,) = done["TrainingJobs"]
    earlier = [j["name"] for j in trial["EarlierTrainingJobs"]]
    assert sorted(j.name for j in jobs) == sorted([*earlier, trial["TrainingJobName"]])
    assert len(jobs) == MAX_TRIES and all(j.status == "Failed" for j in jobs)
    assert all(n.startswith("tiny-001-") for n in earlier)
    assert done["TrainingJobStatusCounters"]["RetryableError"] == MAX_TRIES
    assert done["ObjectiveStatusCounters"]["Failed"] == 1
    assert "BestTrainingJob" not in done
    # Its one trial failed (each of its tries): none succeeded, so the tuning job fails.
    assert done["HyperParameterTuningJobStatus"] == "Failed"
    assert done["FailureReason"].startswith("No training job succeeded after 1 attempt.")


def test_a_control_plane_that_dies_resumes_without_losing_or_repeating_a_trial(
    settings: Settings,
) -> None:
    config = tuning_config(jobs=4, parallel=2, FAKE_LINE_DELAY="0.4")
    with control_plane(settings) as plane:
        create(plane, config)
        wait_for(lambda: describe(plane, "tiny")["TrainingJobs"], 60, "the first trials recorded")
    # The first control plane is gone (its trials' agents run on); a new one takes over.
    with control_plane(settings) as plane:
        done = wait_tuning(plane, "tiny", "Completed")
        jobs = trial_jobs(plane.server.controller.store, "tiny")
    trials = done["TrainingJobs"]
    assert [t["TrialNumber"] for t in trials] == [0, 1, 2, 3]
    assert sorted(j.name for j in jobs) == [t["TrainingJobName"] for t in trials]
    assert all(j.status == "Completed" for j in jobs)
    # Exactly what an uninterrupted search proposes, in order: nothing lost, nothing repeated.
    search = Search(TuningJobConfig(**config), [], name="tiny")
    expected = [search.ask() for _ in range(4)]
    strings = [Search.sagemaker_strings(p.hyperparameters) for p in expected if p]
    assert [t["TunedHyperParameters"] for t in trials] == strings


def test_warm_start_learns_from_its_parent_and_names_the_overall_best(settings: Settings) -> None:
    with control_plane(settings) as plane:
        create(plane, tuning_config(name="parent", jobs=2, parallel=2))
        wait_tuning(plane, "parent", "Completed")
        child = tuning_config(name="child", jobs=2, parallel=2)
        child["warm_start_config"] = {
            "parents": ["parent"], "warm_start_type": "IdenticalDataAndAlgorithm",
        }  # fmt: skip
        create(plane, child)
        done = wait_tuning(plane, "child", "Completed")
        store = plane.server.controller.store
        tuning = store.get_tuning_job("child")
        assert tuning is not None
        search = search_for(store, tuning, stored_config(tuning), store.trials("child"))
    assert search.priors == 2  # the parent's two trials, learnt from as prior trials
    assert done["WarmStartConfig"] == {
        "ParentHyperParameterTuningJobs": [{"HyperParameterTuningJobName": "parent"}],
        "WarmStartType": "IdenticalDataAndAlgorithm",
    }
    assert done["BestTrainingJob"]["TuningJobName"] == "child"
    # Every trial of both reaches the same loss: the first of the child's is the overall best.
    assert (
        done["OverallBestTrainingJob"]["TrainingJobName"]
        == done["TrainingJobs"][0]["TrainingJobName"]
    )
