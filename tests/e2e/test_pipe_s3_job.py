"""End to end: a Pipe-mode channel from S3 (a real SeaweedFS) through `trainops run`.

The script knows nothing of trainops: it reads each epoch's FIFO ``$SM_INPUT_DIR/data/train_<n>``
to its end, as a SageMaker Pipe-mode script does, and reports what it read; the test checks
those bytes against what it uploaded (the objects of the prefix, whole and in key order).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests._support.processes import assert_nothing_left
from tests._support.seaweed import SeaweedS3
from tests.e2e._harness import describe, trainops, write_job

pytestmark = [pytest.mark.slow, pytest.mark.s3]

READS_THE_FIFO = """
import hashlib, json, os, time
config = json.load(open(os.environ["SM_INPUT_CONFIG_DIR"] + "/inputdataconfig.json"))["train"]
assert config["TrainingInputMode"] == "Pipe", config
read = []
for epoch in range(2):
    path = os.path.join(os.environ["SM_INPUT_DIR"], "data", f"train_{epoch}")
    deadline = time.monotonic() + 120  # as SageMaker's readers do: wait for the FIFO to appear
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"no {path}"
        time.sleep(0.05)
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as fifo:
        while chunk := fifo.read(65536):
            digest.update(chunk)
            size += len(chunk)
    read.append({"sha256": digest.hexdigest(), "bytes": size})
    print(f"epoch {epoch}: {size} bytes", flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "read.json"), "w") as out:
    json.dump(read, out)
"""


def test_a_script_reads_an_s3_prefix_through_a_pipe_channel(
    tmp_path: Path, s3_server: SeaweedS3
) -> None:
    bucket = s3_server.create_bucket("pipe-e2e")
    client = s3_server.client()
    # Small data, of sizes that cross the reader's chunks, an empty object among them; and an
    # object beside the prefix that must not be streamed.
    objects = {f"train/part-{i:02d}.bin": os.urandom(size)
               for i, size in enumerate([0, 1, 4095, 65537, 300_000, 1 << 20])}  # fmt: skip
    for key, body in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    client.put_object(Bucket=bucket, Key="training/not-in-the-prefix.bin", Body=b"no")
    uploaded = b"".join(objects[key] for key in sorted(objects))
    spec = write_job(
        tmp_path,
        READS_THE_FIFO,
        job_name="pipe-s3",
        inputs={"train": {"uri": f"s3://{bucket}/train/", "mode": "Pipe"}},
        output_path=f"s3://{bucket}/jobs",
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, **s3_server.env())
    assert result.returncode == 0, result.stdout + result.stderr
    job = describe("pipe-s3", home, **s3_server.env())
    assert job["TrainingJobStatus"] == "Completed", job.get("FailureReason")
    want = {"sha256": hashlib.sha256(uploaded).hexdigest(), "bytes": len(uploaded)}
    assert _read_by_script(client, bucket) == [want, want]  # every epoch, every byte, in order
    assert f"[algo-1] epoch 1: {len(uploaded)} bytes" in result.stdout
    assert s3_server.secret_key not in json.dumps(job)
    assert_nothing_left("pipe-s3", [tmp_path])


def _read_by_script(client: Any, bucket: str) -> Any:
    """What the script wrote to its model folder, from the model artifact on S3."""
    body = client.get_object(Bucket=bucket, Key="jobs/pipe-s3/output/model.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(body["Body"].read()), mode="r:gz") as tar:
        handle = tar.extractfile("read.json")
        assert handle is not None
        return json.load(handle)
