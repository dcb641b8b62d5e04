"""Trials over object storage (SeaweedFS's S3, as the suite starts it) and by job name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainops._settings import Settings
from trainops.debugger import CollectionManager, create_trial, modes
from trainops.debugger.format import (
    END_MARKER,
    TensorFileWriter,
    collections_key,
    event_file_key,
    index_key,
    mark_training_end,
)
from trainops.spec import JobSpec
from trainops.storage import store_for
from trainops.store import MetadataStore


def test_an_s3_trial_sees_a_step_once_its_event_file_is_there(
    tmp_path: Path, s3_settings: Settings, s3_bucket: str
) -> None:
    local = tmp_path / "tensors"
    writer = TensorFileWriter(local, "worker_0")
    writer.write_collections(CollectionManager())
    for step in range(3):
        writer.write_step(step, modes.TRAIN, step, [("w", np.full(4, step, np.float32))])
    mark_training_end(local)
    prefix = f"s3://{s3_bucket}/job/debug-output"
    objects = store_for(prefix, s3_settings)
    keys = [collections_key("worker_0"), *(index_key(s, "worker_0") for s in range(3))]
    keys += [event_file_key(s, "worker_0") for s in range(2)]  # step 2's events come late
    for key in keys:
        objects.upload(local / key, f"{prefix}/{key}")
    trial = create_trial(prefix, settings=s3_settings)
    assert trial.steps() == [0, 1] and trial.errors == []
    objects.upload(
        local / event_file_key(2, "worker_0"), f"{prefix}/{event_file_key(2, 'worker_0')}"
    )
    assert trial.steps() == [0, 1, 2]
    np.testing.assert_array_equal(trial.tensor("w").value(2, modes.TRAIN), np.full(4, 2))
    objects.upload(local / END_MARKER, f"{prefix}/{END_MARKER}")
    trial.end_delay = 0.0
    trial.refresh()
    trial.refresh()
    assert trial.loaded_all_steps


def test_a_trial_by_job_name_reads_the_jobs_debug_output(tmp_path: Path) -> None:
    settings = Settings.load()
    output = tmp_path / "out" / "my-job"
    store = MetadataStore(settings.db_path)
    try:
        store.create_job(
            name="my-job",
            spec=JobSpec(entry_point="train.py").view(),
            code_uri="file:///code.tar.gz",
            output_prefix=output.as_uri(),
            max_attempts=1,
            status="InProgress",
            secondary_status="Training",
            message="",
            now=1.0,
        )
    finally:
        store.close()
    TensorFileWriter(output / "debug-output", "worker_0").write_step(
        0, modes.TRAIN, 0, [("w", np.ones(2))]
    )
    trial = create_trial("my-job")
    assert trial.steps() == [0] and trial.name == "my-job"
    with pytest.raises(LookupError, match="no job named 'other-job'"):
        create_trial("other-job")
