"""Reading a home with no server: the store read directly, unless a job has not ended."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainops import JobNotFoundError, TrainopsError
from trainops._settings import Settings
from trainops.client import Client, StoreReader, read_jobs, resolve_job_name
from trainops.spec import JobSpec
from trainops.store import MetadataStore


def _record(settings: Settings, name: str, status: str, when: float) -> None:
    _records(settings, [name], status, when)


def _records(settings: Settings, names: list[str], status: str, first: float) -> None:
    """Jobs recorded in the home's store as a control plane records them, one a second."""
    store = MetadataStore(settings.db_path)
    view = JobSpec(entry_point="train.py").view()
    try:
        for i, name in enumerate(names):
            store.create_job(
                name=name,
                spec=view,
                code_uri="file:///nowhere/sourcedir.tar.gz",
                output_prefix=f"file:///nowhere/{name}",
                max_attempts=1,
                status=status,
                secondary_status=status,
                message="recorded by the test",
                now=first + i,
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


def test_names_among_more_jobs_than_one_look_covers(settings: Settings) -> None:
    """Past the 1,000 newest jobs whose names contain the text, an older whole name is still
    found, and a start of a name is never called unique when older jobs may share it."""
    _records(settings, ["bulk", "ulk-old"], "Completed", 0.0)
    _records(settings, [f"bulk-{i:04d}" for i in range(1000)], "Completed", 100.0)
    with read_jobs(settings) as reader:
        assert resolve_job_name(reader, "bulk") == "bulk"  # older than the 1,000 looked at
        newest = r"\(bulk-0999, bulk-0998, bulk-0997, bulk-0996, bulk-0995, \.\.\.\)"
        with pytest.raises(
            TrainopsError, match=rf"^'bulk-' starts the names of 1000 or more jobs {newest}"
        ):
            resolve_job_name(reader, "bulk-")
        with pytest.raises(JobNotFoundError, match="none of the 1000 newest jobs"):
            resolve_job_name(reader, "ulk")  # ulk-old starts with it, but is not looked at
        assert resolve_job_name(reader, "bulk-0042") == "bulk-0042"
