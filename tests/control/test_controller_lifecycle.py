"""How jobs end: completion, stop, max runtime, a failing host, merged parts of many hosts."""

from __future__ import annotations

import copy
import dataclasses
import io
import itertools
import socket
import tarfile
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from tests.control._harness import control_plane, wait_for
from trainops._settings import Settings
from trainops.agent.launchers import LAUNCHERS
from trainops.backends import LocalBackend
from trainops.backends._local import agent_process

pytestmark = pytest.mark.slow

HANG = {"FAKE_HANG_ATTEMPTS": "1", "FAKE_LINES": "1"}


def _statuses(job: dict[str, object]) -> list[str]:
    transitions = job["SecondaryStatusTransitions"]
    assert isinstance(transitions, list)
    return [t["Status"] for t in transitions]


def test_a_job_completes_with_its_transitions_metrics_and_cost(settings: Settings) -> None:
    with control_plane(settings) as plane:
        submitted = plane.submit("done", {"FAKE_LINES": "5"}, hyperparameters={"epochs": 3})
        assert (submitted["TrainingJobStatus"], submitted["SecondaryStatus"]) == (
            "InProgress",
            "Starting",
        )
        job = plane.wait_ended("done")
        lines = plane.log_lines("done")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"], job["FailureReason"]) == (
        "Completed",
        "Completed",
        None,
    )
    assert _statuses(job) == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    transitions = job["SecondaryStatusTransitions"]
    assert transitions[0]["StatusMessage"] == "Preparing the instances for training"
    for before, after in itertools.pairwise(transitions):
        assert before["EndTime"] == after["StartTime"]
    assert transitions[-1]["EndTime"] == transitions[-1]["StartTime"] == job["TrainingEndTime"]
    finals = {m["MetricName"]: m["Value"] for m in job["FinalMetricDataList"]}
    assert finals == {"loss": 0.2, "step": 4.0}
    assert job["TrainingTimeInSeconds"] == job["BillableTimeInSeconds"] >= 1
    assert job["Cost"]["EstimatedCostUsd"] > 0 and job["Cost"]["InstanceCount"] == 1
    assert job["HyperParameters"] == {"epochs": "3"}
    node = socket.gethostname()  # the local backend's one machine
    assert job["Hosts"] == [
        {"Host": "algo-1", "Status": "Completed", "ExitCode": 0, "Attempt": 1, "Node": node}
    ]
    assert lines == [f"algo-1 line {i}" for i in range(5)]
    tree = settings.jobs_dir / "done" / "attempt-1"
    # The backend made the agent's state directory; the host tree is the (real) agent's to make.
    assert (tree / ".agents" / "algo-1" / "journal.jsonl").is_file()


def test_stop_ends_the_job_stopped(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("halt", HANG)
        plane.wait_secondary("halt", "Training")
        response = plane.stop("halt")
        assert response.status_code == 202
        assert response.json()["TrainingJobStatus"] in ("Stopping", "Stopped")
        job = plane.wait_ended("halt")
        assert plane.stop("halt").status_code == 409
        lines = plane.log_lines("halt")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert _statuses(job)[-2:] == ["Stopping", "Stopped"]
    assert job["Hosts"][0]["Status"] == "Stopped"
    # The stop reaches the agent as SIGTERM and as a command, whichever comes first.
    assert {"stopping: SIGTERM", "stopping: Stop requested"} & set(lines)


def test_a_job_stopped_before_it_starts_ends_at_once(settings: Settings) -> None:
    small = Settings(home=settings.home, capacity=type(settings.capacity)(cpus=2, memory_mb=64_000))
    with control_plane(small) as plane:
        plane.submit("runner", HANG)
        plane.wait_secondary("runner", "Training")
        plane.submit("queued", HANG)
        plane.wait_secondary("queued", "Pending")
        assert plane.stop("queued").status_code == 202
        queued = plane.wait_ended("queued")
        plane.stop("runner")
        plane.wait_ended("runner")
    assert _statuses(queued) == ["Starting", "Pending", "Stopping", "Stopped"]
    assert queued["TrainingStartTime"] is None and queued["BillableTimeInSeconds"] == 0


def test_max_runtime_stops_the_job(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("slow", HANG, stopping_condition={"max_runtime_in_seconds": 1})
        job = plane.wait_ended("slow")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert "MaxRuntimeInSeconds (1 s)" in job["SecondaryStatusTransitions"][-1]["StatusMessage"]


def test_a_failing_host_tears_down_the_others(settings: Settings) -> None:
    env = {**HANG, "FAKE_FAIL_HOST": "algo-2", "FAKE_FAIL_REASON": "ValueError: bad batch"}
    with control_plane(settings) as plane:
        plane.submit("broken", env, instance_count=2)
        job = plane.wait_ended("broken")
        hosts = plane.wait_for_hosts_down("broken")
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Failed", "Failed")
    assert job["FailureReason"] == "ValueError: bad batch"
    assert {h["Host"]: h["Status"] for h in hosts} == {"algo-1": "Stopped", "algo-2": "Failed"}


def test_the_job_fails_with_the_earliest_failure_by_time_not_the_first_host_to_end(
    settings: Settings,
) -> None:
    # algo-1 ends first, failing because its peer is gone; algo-2's rank failed before that,
    # but algo-2 was slow to end: its reason is the job's.
    env = {
        "FAKE_FAIL_HOST": "algo-1",
        "FAKE_FAIL_REASON": "rank 0 on algo-1: RuntimeError: Connection closed by peer",
        "FAKE_FAILED_EARLIER_HOST": "algo-2",
        "FAKE_FAILED_EARLIER_REASON": "rank 3 on algo-2: RuntimeError: rank 3 ran out of data",
        "FAKE_READY_FILE": str(settings.home / "algo-2-training"),  # algo-1 fails after that
    }
    with control_plane(settings) as plane:
        plane.submit("blame", env, instance_count=2)
        job = plane.wait_ended("blame")
        hosts = plane.wait_for_hosts_down("blame")
        left = dict(plane.server.controller.core.failure_times)
    assert {h["Host"]: h["Status"] for h in hosts} == {"algo-1": "Failed", "algo-2": "Failed"}
    assert job["TrainingJobStatus"] == "Failed"
    assert job["FailureReason"] == "rank 3 on algo-2: RuntimeError: rank 3 ran out of data"
    assert left == {}  # forgotten once the job ended


def test_a_host_whose_agent_goes_silent_is_lost_and_its_agent_ended(settings: Settings) -> None:
    # The agent process still runs (the backend sees it alive) but reports nothing any more:
    # a hung agent, or one cut off from the control plane. Heartbeats say what the pid cannot.
    silent = dataclasses.replace(settings, heartbeat_timeout=1)
    with control_plane(silent) as plane:
        plane.submit("silent", {"FAKE_SILENT_ATTEMPTS": "1", **HANG}, instance_count=2)
        job = plane.wait_ended("silent", timeout=30)
        seen_ended = time.time()
        [handle, *_] = plane.agent_handles("silent")
        plane.wait_for_hosts_down("silent")
    assert job["TrainingJobStatus"] == "Failed", job
    assert "sent no report for 1 s" in job["FailureReason"], job["FailureReason"]
    # It ended when it was last heard from, not when the silence was noticed (1 s later at least).
    assert datetime.fromisoformat(job["TrainingEndTime"]).timestamp() <= seen_ended - 1
    pid, created = agent_process(handle)  # the local backend's handle
    assert pid is not None and not _running(pid, created)


def _running(pid: int, create_time: float | None) -> bool:
    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return False
    return process.create_time() == create_time and process.status() != psutil.STATUS_ZOMBIE


def test_the_parts_of_many_hosts_merge_into_one_model(settings: Settings) -> None:
    with control_plane(settings) as plane:
        plane.submit("merged", {"FAKE_PARTS": "1"}, instance_count=3)
        job = plane.wait_ended("merged")
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    artifacts = {a["Name"]: a for a in job["Artifacts"] if "Host" not in a}
    model_uri = job["ModelArtifacts"]["S3ModelArtifacts"]
    assert artifacts["model"]["Uri"] == model_uri and model_uri.endswith("/output/model.tar.gz")
    assert artifacts["output"]["Uri"].endswith("/output/output.tar.gz")
    members = _members(Path(model_uri.removeprefix("file://")))
    assert members == {
        "shared.txt": b"algo-1",
        "algo-1.txt": b"x",
        "algo-2.txt": b"x",
        "algo-3.txt": b"x",
    }
    output_dir = Path(model_uri.removeprefix("file://")).parent
    assert not list((output_dir / "model-parts").glob("*")) and not list(
        (output_dir / "output-parts").glob("*")
    )
    assert [t for t in _statuses(job) if t == "Uploading"] == ["Uploading"]


@pytest.mark.parametrize("ending", ["stopped", "failed"])
def test_a_multi_host_job_that_does_not_complete_still_merges_its_parts(
    settings: Settings, ending: str
) -> None:
    env = {**HANG, "FAKE_PARTS": "1"}
    if ending == "failed":
        env |= {"FAKE_FAIL_HOST": "algo-2", "FAKE_FAIL_REASON": "ValueError: bad batch"}
        env |= {"FAKE_LINES": "3", "FAKE_LINE_DELAY": "0.5"}  # algo-1 is up when algo-2 fails
    with control_plane(settings) as plane:
        plane.submit("partial", env, instance_count=2)
        if ending == "stopped":
            both = {"algo-1 line 0", "algo-2 line 0"}
            wait_for(lambda: both <= set(plane.log_lines("partial")), what="both hosts training")
            plane.stop("partial")
        job = plane.wait_ended("partial")
    assert job["TrainingJobStatus"] == ending.capitalize()
    artifacts = {a["Name"]: a["Uri"] for a in job["Artifacts"] if "Host" not in a}
    assert {"model", "output"} <= set(artifacts), job["Artifacts"]
    assert not {"model_part", "output_part"} & {a["Name"] for a in job["Artifacts"]}
    assert job["ModelArtifacts"]["S3ModelArtifacts"] == artifacts["model"]
    members = _members(Path(artifacts["model"].removeprefix("file://")))
    assert set(members) == {"shared.txt", "algo-1.txt", "algo-2.txt"}
    if ending == "failed":
        assert job["FailureReason"] == "ValueError: bad batch"
        assert {h["Host"]: h["Status"] for h in job["Hosts"]} == {
            "algo-1": "Stopped",
            "algo-2": "Failed",
        }


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {
            m.name: (tar.extractfile(m) or io.BytesIO()).read()
            for m in tar.getmembers()
            if m.isfile()
        }


def test_a_launcher_cannot_span_more_hosts_than_it_can_is_refused_by_name(
    settings: Settings,
) -> None:
    # Every launcher spans any number of hosts today; one that cannot is refused at submission.
    one_host = copy.copy(LAUNCHERS["mpi"])
    one_host.max_hosts = 1
    with LAUNCHERS.added("mpi", one_host, replace=True), control_plane(settings) as plane:
        body = {
            "job_name": "mpi-two-hosts",
            "spec": {
                "entry_point": "train.py",
                "instance_count": 2,
                "distribution": {"mpi": {"enabled": True}},
            },
            "code_uri": plane.code_uri,
        }
        response = plane.client.post("/api/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    assert "distribution.mpi" in response.text and "at most 1 host" in response.text


def test_a_backend_that_spans_machines_refuses_files_they_cannot_read(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A multi-machine backend's hosts cannot read this machine's file:// URIs; only object
    # storage every machine reaches will do (s3://, or folders every machine mounts).
    monkeypatch.setattr(LocalBackend, "spans_machines", True)
    spec = {"entry_point": "train.py", "inputs": {"train": {"uri": "s3://bucket/train"}}}
    with control_plane(settings) as plane:
        refused = plane.client.post(
            "/api/v1/jobs", json={"job_name": "far", "spec": spec, "code_uri": plane.code_uri}
        )
    assert refused.status_code == 422, refused.text
    fields = {path for path, _reason in refused.json()["detail"]["problems"]}
    assert fields == {"code_uri", "output_path"}  # the s3:// channel is fine
    assert "cannot read it: use s3://" in refused.text

    home = str(settings.home)
    shared = dataclasses.replace(settings, shared_paths=(home,))
    escape = f"file://{home}/../elsewhere/train"  # under the shared folder only by its name
    spec["inputs"] = {"train": {"uri": escape}, "test": {"uri": f"file://{home}/data/test"}}
    with control_plane(shared) as plane:
        answer = plane.client.post(
            "/api/v1/jobs", json={"job_name": "near", "spec": spec, "code_uri": plane.code_uri}
        )
    assert answer.status_code == 422, answer.text
    assert [path for path, _ in answer.json()["detail"]["problems"]] == ["inputs.train.uri"]
