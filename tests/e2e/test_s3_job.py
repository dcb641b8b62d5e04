"""End to end against a real S3 server (SeaweedFS): channel in, model, output and checkpoints out."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from tests._support.seaweed import SeaweedS3
from tests.e2e._harness import describe, trainops, write_job

pytestmark = [pytest.mark.slow, pytest.mark.s3]

COPY = """
import json, os, shutil
channel = os.environ["SM_CHANNEL_TRAIN"]
names = sorted(os.listdir(channel))
total = sum(int(open(os.path.join(channel, n)).read()) for n in names)
print(f"files={len(names)} total={total}", flush=True)
json.dump({"total": total}, open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w"))
open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "report.txt"), "w").write("ok")
ck = os.environ["SM_CHECKPOINT_DIR"]
if os.path.exists(os.path.join(ck, "state.json")):  # a later job resumes from the checkpoint
    print("resumed from", open(os.path.join(ck, "state.json")).read(), flush=True)
open(os.path.join(ck, "state.json"), "w").write(json.dumps({"total": total}))
"""


def test_job_reads_and_writes_s3(
    tmp_path: Path, s3_server: SeaweedS3, backend: dict[str, str]
) -> None:
    # Everything on S3, the code archive too: no folder is shared between machines here.
    env = {k: v for k, v in backend.items() if k != "TRAINOPS_SHARED_PATHS"}
    env.update(s3_server.env())
    s3 = s3_server.client()
    bucket = s3_server.create_bucket("e2e")
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"train/part-{i}.txt", Body=str(i + 1).encode())
    spec = write_job(
        tmp_path,
        COPY,
        job_name="s3job",
        inputs={"train": {"uri": f"s3://{bucket}/train/"}},
        output_path=f"s3://{bucket}/jobs",
        checkpoint={"uri": f"s3://{bucket}/checkpoints/s3job/"},
        metric_definitions=[{"name": "total", "regex": "total=([0-9]+)"}],
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[algo-1] files=5 total=15" in result.stdout
    job = describe("s3job", home, **env)
    assert (
        job["ModelArtifacts"]["S3ModelArtifacts"] == f"s3://{bucket}/jobs/s3job/output/model.tar.gz"
    )
    model = s3.get_object(Bucket=bucket, Key="jobs/s3job/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(model), mode="r:gz") as tar:
        handle = tar.extractfile("model.json")
        assert handle is not None and json.load(handle) == {"total": 15}
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert "checkpoints/s3job/state.json" in keys
    assert "jobs/s3job/output/output.tar.gz" in keys
    assert "jobs/s3job/source/sourcedir.tar.gz" in keys
    assert "jobs/s3job/logs/algo-1.log" in keys
    assert s3_server.secret_key not in json.dumps(job)
    # A second job with the same checkpoint URI starts from what the first one left there.
    again = write_job(
        tmp_path / "again",
        COPY,
        job_name="s3job-again",
        inputs={"train": {"uri": f"s3://{bucket}/train/"}},
        output_path=f"s3://{bucket}/jobs",
        checkpoint={"uri": f"s3://{bucket}/checkpoints/s3job/"},
    )
    resumed = trainops("run", str(again), home=home, **env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert '[algo-1] resumed from {"total": 15}' in resumed.stdout
