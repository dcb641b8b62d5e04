"""Reading a home with no server: the store read directly, unless a job has not ended."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainops import JobNotFoundError
from trainops._settings import Settings
from trainops.client import Client, StoreReader, read_jobs, resolve_job_name
from trainops.spec import JobSpec
from trainops.store import MetadataStore


def _record(settings: Settings, name: str, status: str, when: float) -> None:
    store = MetadataStore(settings.db_path)
    try:
        store.create_job(
            name=name,
            spec=JobSpec(entry_point="train.py").view(),
            code_uri="file:///nowhere/sourcedir.tar.gz",
            output_prefix=f"file:///nowhere/{name}",
            max_attempts=1,
            status=status,
            secondary_status=status,
            message="recorded by the test",
            now=when,
        )
    finally:
        store.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home")


def test_ended_jobs_are_read_from_the_store(settings: Settings) -> None:
    _record(settings, "first-job", "Completed", time.time() - 10)
    _record(settings, "second-job", "Failed", time.time())
    with read_jobs(settings) as reader:
        assert isinstance(reader, StoreReader)
        names = [job["TrainingJobName"] for job in reader.list_jobs()]
        assert names == ["second-job", "first-job"]
        assert reader.describe("first-job")["TrainingJobStatus"] == "Completed"
        assert reader.list_jobs(status="Failed", name_contains="SECOND")[0]["TrainingJobName"] == (
            "second-job"
        )
        assert resolve_job_name(reader, "latest") == "second-job"
        assert resolve_job_name(reader, "fir") == "first-job"
        page = reader.logs("first-job", runs=True)
        assert (page["runs"], page["next"], page["TrainingJobStatus"]) == ([], 0, "Completed")
        assert reader.metrics("first-job") == []
        with pytest.raises(JobNotFoundError, match="no job named 'third-job'"):
            reader.describe("third-job")


def test_a_job_not_ended_gets_a_control_plane(settings: Settings) -> None:
    _record(settings, "left-running", "InProgress", time.time())
    assert StoreReader.open(settings) is None
    with read_jobs(settings) as reader:
        # An embedded server adopted it (its agents may still hold events to hand over).
        assert isinstance(reader, Client) and reader.embedded


def test_a_home_without_a_store_has_no_jobs_and_gets_none(settings: Settings) -> None:
    with read_jobs(settings) as reader:
        assert reader.list_jobs() == []
        with pytest.raises(JobNotFoundError):
            resolve_job_name(reader, "latest")
    assert not settings.home.exists()
