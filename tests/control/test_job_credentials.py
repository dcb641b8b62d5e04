"""The per-job object-storage key seam (``control/_credentials.py``): what a job may reach, and
when the control plane issues and revokes its key. The served SeaweedFS's implementation is
tried for real in tests/storage/test_seaweed_identities.py and tests/e2e/test_served_s3_job.py;
here a store that records its calls stands behind the seam, and the agents are the fake ones."""

from __future__ import annotations

import json
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

from tests.control._harness import ControlPlane, control_plane, fake_backend
from trainops._errors import StorageError
from trainops._settings import Settings
from trainops.control import JobController
from trainops.control._credentials import job_grant, manifest_prefixes
from trainops.spec import JobSpec
from trainops.storage import JobGrant, store_for
from trainops.store import MetadataStore


class RecordingKeys:
    """Issues keys as variables, and records each call with the job's status at that moment."""

    def __init__(self, store: MetadataStore, *, fail: bool = False) -> None:
        self.store = store
        self.fail = fail
        self.calls: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def _record(self, what: str, job: str) -> None:
        record = self.store.get_job(job)
        with self._lock:
            self.calls.append((what, job, record.status if record else "-"))

    def issue(self, job: str, grant: JobGrant) -> dict[str, str]:
        self._record("issue", job)
        if self.fail:
            raise StorageError("the key store is down")
        return {"AWS_ACCESS_KEY_ID": f"key-of-{job}"}

    def revoke(self, job: str) -> None:
        self._record("revoke", job)

    def retain(self, jobs: Collection[str]) -> None:
        with self._lock:
            self.calls.append(("retain", ",".join(sorted(jobs)), "-"))


def _keys(plane: ControlPlane, *, fail: bool = False) -> RecordingKeys:
    keys = RecordingKeys(plane.server.controller.store, fail=fail)
    plane.server.controller.core.credentials = keys
    return keys


def test_a_jobs_key_is_issued_at_launch_and_revoked_before_its_final_status(
    settings: Settings,
) -> None:
    with control_plane(settings) as plane:
        keys = _keys(plane)
        plane.submit("keyed")
        assert plane.wait_ended("keyed")["TrainingJobStatus"] == "Completed"
    assert keys.calls == [("issue", "keyed", "InProgress"), ("revoke", "keyed", "InProgress")]


def test_a_key_that_cannot_be_issued_fails_the_job_with_the_reason(settings: Settings) -> None:
    with control_plane(settings) as plane:
        _keys(plane, fail=True)
        plane.submit("unkeyed")
        ended = plane.wait_ended("unkeyed")
    assert ended["TrainingJobStatus"] == "Failed"
    assert (
        "could not issue the job's object-storage key: the key store is down"
        in (ended["FailureReason"])
    )


def test_a_jobs_grant_is_its_code_and_channels_to_read_and_its_output_folders_to_write(
    tmp_path: Path,
) -> None:
    spec = JobSpec(
        entry_point="train.py",
        inputs={
            "train": "s3://data/train/",
            "test": {"uri": "s3://data/test/"},
            "same": "s3://data/train/",
        },
        checkpoint={"uri": "s3://ckpt/run-1"},
        profiler_config={"s3_output_path": "s3://prof/out"},
        tensorboard_output_config={"s3_output_path": "s3://tb/out"},
        debugger_hook_config={"s3_output_path": "s3://dbg"},
    )
    store = MetadataStore(tmp_path / "db")
    record = store.create_job(
        name="granted",
        spec=spec.view(),
        code_uri="s3://code/granted/sourcedir.tar.gz",
        output_prefix="s3://out/granted",
        max_attempts=1,
        status="InProgress",
        secondary_status="Starting",
        message="",
        now=1.0,
    )
    assert job_grant(record) == JobGrant(
        read=("s3://code/granted/sourcedir.tar.gz", "s3://data/train/", "s3://data/test/"),
        write=(
            "s3://out/granted",
            "s3://ckpt/run-1",
            "s3://prof/out",
            "s3://tb/out",
            "s3://dbg/granted/debug-output",
        ),
    )
    store.close()


def test_a_starting_control_plane_revokes_the_keys_of_jobs_that_ended(settings: Settings) -> None:
    store = MetadataStore(settings.db_path)
    for name, status in (("ended", "Completed"), ("running", "InProgress")):
        store.create_job(
            name=name,
            spec=JobSpec(entry_point="train.py", instance_type="ml.m5.large").view(),
            code_uri="file:///code.tar.gz",
            output_prefix=f"file:///out/{name}",
            max_attempts=1,
            status=status,
            secondary_status="Starting",
            message="",
            now=1.0,
        )
    keys = RecordingKeys(store)
    controller = JobController(settings, store, fake_backend(settings), credentials=keys)
    try:
        controller.start("http://127.0.0.1:9")
    finally:
        controller.close()
        store.close()
    assert keys.calls[0] == ("retain", "running", "-")


def test_a_manifest_files_prefix_is_read_from_its_head(tmp_path: Path) -> None:
    """A ManifestFile's objects lie under the prefix its first element names: the job may read
    them. A manifest that cannot be read or parsed adds nothing (the channel fails in the job)."""
    manifests = {
        "good": [{"prefix": "s3://images/cats/"}, "1.jpg", "2.jpg"],
        "spaced": '  [ { "prefix" : "s3://images/dogs/" } , "7.jpg"]',
        "not-a-folder": [{"prefix": "s3://images/file.jpg"}, "x"],
        "no-prefix": ["1.jpg"],
        "garbage": "\\u0000 not json",
    }
    inputs: dict[str, Any] = {}
    for name, body in manifests.items():
        path = tmp_path / f"{name}.json"
        path.write_text(body if isinstance(body, str) else json.dumps(body))
        inputs[name] = {"uri": path.as_uri(), "s3_data_type": "ManifestFile"}
    inputs["missing"] = {"uri": (tmp_path / "none.json").as_uri(), "s3_data_type": "ManifestFile"}
    inputs["plain"] = {"uri": "s3://images/plain/"}
    spec = JobSpec(entry_point="train.py", inputs=inputs)
    store = MetadataStore(tmp_path / "db")
    record = store.create_job(
        name="manifested",
        spec=spec.view(),
        code_uri="s3://code/sourcedir.tar.gz",
        output_prefix="s3://out/manifested",
        max_attempts=1,
        status="InProgress",
        secondary_status="Starting",
        message="",
        now=1.0,
    )
    store.close()
    settings = Settings(home=tmp_path / "home")

    def head(uri: str, size: int) -> bytes:
        return store_for(uri, settings).get_range(uri, 0, size)

    prefixes = manifest_prefixes(record, head)
    assert prefixes == ("s3://images/cats/", "s3://images/dogs/")
    assert set(prefixes) <= set(job_grant(record, prefixes).read)
