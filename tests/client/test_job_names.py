"""Generated job names never collide, however many submissions of one spec run at once.

Names used to come from the client's millisecond clock: 3 of 250 concurrent `trainops submit` of
one spec failed with "a job named ... already exists". The server now hands them out.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.control._harness import ControlPlane, control_plane
from trainops import JobSpec, SpecError
from trainops._settings import Settings
from trainops.client import Client, JobNameTakenError, submit_job
from trainops.spec import JobNamer

SUBMISSIONS = 250
STAMP = r"\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-\d{3}"


def test_the_namer_never_repeats_and_skips_taken_names() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    taken = {"demo-2026-01-02-03-04-05-679"}
    namer = JobNamer(taken.__contains__)
    names = [namer.name("demo", now) for _ in range(3)]
    assert names == [
        "demo-2026-01-02-03-04-05-678",
        "demo-2026-01-02-03-04-05-680",
        "demo-2026-01-02-03-04-05-681",
    ]
    long = namer.name("a" * 63, now)
    assert len(long) == 63 and re.fullmatch(rf"a{{39}}-{STAMP}", long)
    with pytest.raises(SpecError, match="base_job_name"):
        namer.name("-bad name-", now)


@pytest.mark.slow
def test_concurrent_submissions_of_one_spec_all_get_their_own_job(
    settings: Settings, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print('hi')\n")
    spec = JobSpec(entry_point="train.py", base_job_name="burst", instance_type="ml.m5.large")
    with control_plane(settings) as plane:
        _occupy_the_machine(plane)
        names: list[str] = []
        failures: list[BaseException] = []
        start = threading.Barrier(SUBMISSIONS)

        def submit() -> None:
            try:
                with Client(plane.server.url, plane.server.token) as client:
                    start.wait(timeout=120)
                    names.append(submit_job(client, spec, settings, base_dir=work, progress=False))
            except BaseException as exc:  # every failure is reported, not lost in a thread
                failures.append(exc)

        threads = [threading.Thread(target=submit) for _ in range(SUBMISSIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=240)
        assert failures == []
        assert len(names) == len(set(names)) == SUBMISSIONS
        assert all(re.fullmatch(rf"burst-{STAMP}", name) for name in names)
        listed = plane.client.get("/api/v1/jobs", params={"limit": 1000}).json()["jobs"]
        assert {j["TrainingJobName"] for j in listed} >= set(names)


def _occupy_the_machine(plane: ControlPlane) -> None:
    """A job holding every CPU, so the burst waits Pending instead of starting 250 agents."""
    plane.submit(
        "hog", {"FAKE_LINES": "0", "FAKE_HANG_ATTEMPTS": "1"}, instance_type="ml.m5.4xlarge"
    )
    plane.wait_secondary("hog", "Training")


def test_an_explicit_name_that_exists_is_a_clear_error(settings: Settings, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("")
    spec = JobSpec(entry_point="train.py", job_name="taken")
    with control_plane(settings) as plane, Client(plane.server.url, plane.server.token) as client:
        plane.submit("taken", {"FAKE_LINES": "0"})
        with pytest.raises(JobNameTakenError, match="a job named 'taken' already exists"):
            submit_job(client, spec, settings, base_dir=work, progress=False)
        response = plane.client.post(
            "/api/v1/jobs",
            json={"job_name": "taken", "spec": {"entry_point": "t.py"}, "code_uri": plane.code_uri},
        )
        assert response.status_code == 409
        assert response.json()["detail"]["error"] == "conflict"
        plane.wait_ended("taken")
