"""End to end: a FastFile channel on s3:// through `trainops run`, two hosts, each reading its
share of a SeaweedFS prefix through its own graft of rclone's mount; nothing is left mounted
and no rclone is left running once the job has ended."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import psutil
import pytest

from tests._support.seaweed import SeaweedS3
from tests._support.system import require
from tests.agent.channels._views import fuse_mounts
from tests.e2e._harness import describe, trainops, write_job

pytestmark = [pytest.mark.slow, pytest.mark.s3]

READS_ITS_SHARE = """
import errno, hashlib, json, os
root = os.environ["SM_CHANNEL_TRAIN"]
config = json.load(open(os.environ["SM_INPUT_CONFIG_DIR"] + "/inputdataconfig.json"))["train"]
assert config["TrainingInputMode"] == "FastFile", config
expected = json.loads(os.environ["SM_HP_EXPECTED"])
seen = {}
for dirpath, _dirs, names in os.walk(root):
    for name in names:
        path = os.path.join(dirpath, name)
        seen[os.path.relpath(path, root)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
assert seen and all(expected[key] == digest for key, digest in seen.items()), seen
try:
    open(os.path.join(root, "new"), "w")
    raise SystemExit("the view took a write")
except OSError as exc:
    assert exc.errno == errno.EROFS, exc
print("share: " + json.dumps(sorted(seen)), flush=True)
"""


def _rclones() -> list[int]:
    found = []
    for process in psutil.process_iter(["name"]):
        if process.info["name"] == "rclone":
            found.append(process.pid)
    return found


def test_two_hosts_read_their_shares_of_an_s3_prefix(tmp_path: Path, s3_server: SeaweedS3) -> None:
    require("rclone")
    before = _rclones()
    bucket = s3_server.create_bucket("fastfile-e2e")
    client = s3_server.client()
    objects = {f"class-{i % 2}/img-{i:02d}.bin": os.urandom(2000 + i * 999) for i in range(10)}
    for key, body in objects.items():
        client.put_object(Bucket=bucket, Key=f"train/{key}", Body=body)
    expected = {key: hashlib.sha256(body).hexdigest() for key, body in objects.items()}
    spec = write_job(
        tmp_path,
        READS_ITS_SHARE,
        job_name="fastfile-job",
        instance_count=2,
        hyperparameters={"expected": json.dumps(expected)},
        inputs={
            "train": {
                "uri": f"s3://{bucket}/train/",
                "mode": "FastFile",
                "distribution": "ShardedByKey",
            }
        },
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, **s3_server.env())
    assert result.returncode == 0, result.stdout + result.stderr
    shares = [
        set(json.loads(line.split("share: ", 1)[1]))
        for line in result.stdout.splitlines()
        if "share: " in line
    ]
    assert len(shares) == 2 and shares[0] | shares[1] == set(objects)
    assert not shares[0] & shares[1]
    assert describe("fastfile-job", home, **s3_server.env())["TrainingJobStatus"] == "Completed"
    assert fuse_mounts() == []
    assert sorted(_rclones()) == sorted(before)
