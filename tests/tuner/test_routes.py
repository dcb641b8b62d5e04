"""The tuning routes over real HTTP: every bad request is refused before anything is recorded,
with a one-line reason naming the field; hostile names and bodies get clear answers, never a
traceback; a job's secrets never appear in a tuning job's answers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.control._harness import ControlPlane, control_plane
from tests.tuner.test_service import create, tuning_config, wait_tuning
from trainops._settings import Settings


@pytest.fixture
def plane(settings: Settings) -> Any:
    with control_plane(settings) as made:
        yield made


def _post(plane: ControlPlane, config: Any, code_uri: str | None = None) -> Any:
    body = {"config": config, "code_uri": code_uri or plane.code_uri}
    return plane.client.post("/api/v1/tuning-jobs", json=body)


def _refused(plane: ControlPlane, config: Any, field: str, words: str) -> None:
    response = _post(plane, config)
    assert response.status_code == 422, response.text
    problems = response.json()["detail"]["problems"]
    assert any(path == field and words in reason for path, reason in problems), problems
    assert response.json()["detail"]["message"].startswith("invalid tuning job:\n")
    assert plane.server.controller.store.list_tuning_jobs() == []


def test_invalid_configs_are_refused_naming_the_field(plane: ControlPlane) -> None:
    config = tuning_config()
    _refused(plane, {**config, "tuning_job_name": "x" * 33}, "tuning_job_name", "1-32")
    _refused(plane, {**config, "tuning_job_name": "../../etc"}, "tuning_job_name", "letters")
    _refused(plane, {k: v for k, v in config.items() if k != "tuning_job_name"},
             "tuning_job_name", "required")  # fmt: skip
    bad_metric = {**config, "objective": {"type": "Minimize", "metric_name": "acc"}}
    _refused(plane, bad_metric, "objective.metric_name", "no metric definition")
    hyperband = {**config, "strategy": "Hyperband", "training_job_early_stopping_type": "Auto"}
    _refused(plane, hyperband, "training_job_early_stopping_type", "Hyperband")
    warm = {**config, "warm_start_config": {"parents": ["ghost"],
                                            "warm_start_type": "TransferLearning"}}  # fmt: skip
    _refused(plane, warm, "warm_start_config.parents.0", "no tuning job named 'ghost'")
    response = _post(plane, config, code_uri="file:///nowhere/sourcedir.tar.gz")
    assert response.status_code == 422 and "upload the code first" in response.text
    assert response.json()["detail"]["message"].startswith("invalid tuning job:\n  code_uri:")
    not_mapping = _post(plane, ["not", "a", "mapping"])
    assert not_mapping.status_code == 400 and "body.config" in not_mapping.text


def test_hostile_names_and_bodies_get_clear_answers(plane: ControlPlane) -> None:
    for name in ("..%2F..%2Fetc", "nope", "x" * 300, "%00"):
        response = plane.client.get(f"/api/v1/tuning-jobs/{name}")
        assert response.status_code == 404, (name, response.text)
        assert response.json()["detail"]["error"] == "not_found"
    huge = {**tuning_config(), "pad": "x" * (5 * 1024 * 1024)}
    assert _post(plane, huge).status_code == 413
    assert plane.client.post("/api/v1/tuning-jobs/nope/stop").status_code == 404
    listed = plane.client.get("/api/v1/tuning-jobs", params={"status": "Bogus"})
    assert listed.status_code == 400 and "status" in listed.text


def test_a_name_taken_is_a_conflict_and_secrets_stay_out(plane: ControlPlane) -> None:
    config = tuning_config(jobs=1, parallel=1, API_KEY="s3cr3t-value")
    created = create(plane, config)
    assert "s3cr3t-value" not in repr(created)
    again = _post(plane, config)
    assert again.status_code == 409 and "already exists" in again.text
    done = wait_tuning(plane, "tiny", "Completed")
    assert "s3cr3t-value" not in repr(done)
    best = plane.client.get("/api/v1/tuning-jobs/tiny/best")
    assert best.status_code == 200 and best.json()["TrainingJobName"].startswith("tiny-001-")
    listed = plane.client.get("/api/v1/tuning-jobs", params={"status": "Completed"}).json()
    assert [t["HyperParameterTuningJobName"] for t in listed["tuning_jobs"]] == ["tiny"]


def test_a_warm_start_that_breaks_sagemaker_s_rules_is_refused(plane: ControlPlane) -> None:
    create(plane, tuning_config(name="parent", jobs=1, parallel=1))
    wait_tuning(plane, "parent", "Completed")
    config = tuning_config(name="child", jobs=1, parallel=1)
    warm = {"parents": ["parent"], "warm_start_type": "IdenticalDataAndAlgorithm"}
    maximize = {**config, "warm_start_config": warm, "objective": {"type": "Maximize",
                                                                  "metric_name": "loss"}}  # fmt: skip
    job = {**config["training_job"], "entry_point": "other.py"}
    job["hyperparameters"] = {**job["hyperparameters"], "extra": 1}
    moved = {**config, "warm_start_config": warm, "training_job": job}
    for child, words in (
        (maximize, "parent: its objective is Minimize loss, not Maximize loss"),
        (moved, "parent: it has 3 static and tuned hyperparameters, this job 4"),
        (moved, "parent: its algorithm (entry_point, source_dir) differs: use TransferLearning"),
    ):
        response = _post(plane, child)
        assert response.status_code == 422, response.text
        problems = response.json()["detail"]["problems"]
        field = "warm_start_config.parents.0"
        assert any(path == field and words in why for path, why in problems), problems
    names = [t.name for t in plane.server.controller.store.list_tuning_jobs()]
    assert names == ["parent"]  # nothing recorded
    assert _post(plane, {**config, "warm_start_config": warm}).status_code == 201
