"""End to end: N hosts on one machine, each with its own tree, sharing a sharded channel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._support.processes import assert_nothing_left
from tests.e2e._harness import artifact, describe, tar_members, trainops, write_job

pytestmark = pytest.mark.slow

SEE = """
import json, os
host = os.environ["SM_CURRENT_HOST"]
channel = os.environ["SM_CHANNEL_TRAIN"]
seen = sorted(os.path.relpath(os.path.join(d, f), channel) for d, _, fs in os.walk(channel) for f in fs)
config = json.load(open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "resourceconfig.json")))
report = {"host": host, "seen": seen, "hosts": json.loads(os.environ["SM_HOSTS"]), "config": config}
open(os.path.join(os.environ["SM_MODEL_DIR"], f"seen-{host}.json"), "w").write(json.dumps(report))
print(host, "saw", len(seen), "objects")
"""


def test_two_hosts_share_a_sharded_channel(tmp_path: Path, backend: dict[str, str]) -> None:
    data = tmp_path / "data"
    for i in range(7):
        (data / f"part-{i:02d}").mkdir(parents=True)
        (data / f"part-{i:02d}" / "rows.csv").write_text(f"{i}\n" * (i + 1))
    spec = write_job(
        tmp_path,
        SEE,
        job_name="sharded",
        instance_count=2,
        inputs={"train": {"uri": "data/", "distribution": "ShardedByKey", "shuffle_seed": 3}},
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, **backend)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[algo-1]" in result.stdout and "[algo-2]" in result.stdout
    members = tar_members(artifact(describe("sharded", home, **backend), "model"))
    reports = [json.loads(members[f"seen-algo-{i}.json"]) for i in (1, 2)]
    first, second = (set(r["seen"]) for r in reports)
    assert first.isdisjoint(second)
    assert first | second == {f"part-{i:02d}/rows.csv" for i in range(7)}
    assert abs(len(first) - len(second)) <= 1
    for report in reports:
        assert report["hosts"] == ["algo-1", "algo-2"]
        assert report["config"]["current_host"] == report["host"]
        assert report["config"]["hosts"] == ["algo-1", "algo-2"]


ONE_HOST_FAILS = """
import os, sys, time
host = os.environ["SM_CURRENT_HOST"]
open(os.path.join(os.environ["SM_MODEL_DIR"], host + ".txt"), "w").write("weights")
if host == "algo-2":
    raise RuntimeError("algo-2 lost its data shard")
print("algo-1 training", flush=True)
time.sleep(3600)  # past every deadline here: only the teardown ends it
"""


def test_a_failed_host_tears_the_job_down(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        ONE_HOST_FAILS,
        job_name="torn",
        instance_count=2,
        stopping_condition={"grace_period_in_seconds": 2},
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)  # ends only if torn down
    assert result.returncode == 1
    job = describe("torn", home)
    assert job["TrainingJobStatus"] == "Failed"
    assert "RuntimeError: algo-2 lost its data shard" in job["FailureReason"]
    # The job ended although algo-1 would have slept an hour: it was torn down, not awaited.
    hosts = {host["Host"]: host["Status"] for host in job["Hosts"]}
    assert hosts["algo-2"] == "Failed" and hosts["algo-1"] != "Completed", hosts
    assert_nothing_left("torn", [tmp_path])
    # The parts the hosts uploaded are merged and listed, as for a completed job.
    names = {a["Name"] for a in job["Artifacts"]}
    assert {"model", "output"} <= names and not {"model_part", "output_part"} & names
    assert tar_members(artifact(job, "model"))["algo-2.txt"] == b"weights"
