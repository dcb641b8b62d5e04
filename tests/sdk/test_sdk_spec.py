"""``TrainingJob`` is a job spec: same fields, same validation, frozen, runtime state kept apart."""

from __future__ import annotations

import pydantic
import pytest

from trainops import Channel, JobSpec, SpecError, TrainingJob, TrainopsError


def test_it_is_a_job_spec_with_the_same_fields() -> None:
    assert issubclass(TrainingJob, JobSpec)
    assert set(TrainingJob.model_fields) == set(JobSpec.model_fields)
    fields = {
        "entry_point": "train.py",
        "source_dir": "src",
        "hyperparameters": {"epochs": 3},
        "instance_count": 2,
        "inputs": {"train": Channel("data/", distribution="sharded")},
    }
    assert TrainingJob(**fields).model_dump() == JobSpec(**fields).model_dump()


def test_validation_names_the_field() -> None:
    with pytest.raises(SpecError) as caught:
        TrainingJob(
            entry_point="train.py", instance_type="ml.c5.xlarg", inputs={"a b": Channel("d/")}
        )
    fields = [path for path, _reason in caught.value.problems]
    assert fields == ["instance_type", "inputs"]


def test_frozen_and_unsubmitted() -> None:
    job = TrainingJob(entry_point="train.py")
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        job.instance_count = 3  # type: ignore[misc]
    assert job.name is None
    for call in (job.describe, job.stop, job.metrics, job.logs, job.wait):
        with pytest.raises(TrainopsError, match=r"not been submitted yet; call fit\(\) first"):
            call()
