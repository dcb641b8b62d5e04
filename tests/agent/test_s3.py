"""A host reading its channel from, and writing checkpoints and outputs to, a real SeaweedFS."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tests.agent._support import make_job
from trainops._settings import Settings
from trainops.protocol import HostOutcome
from trainops.storage import store_for

pytestmark = [pytest.mark.slow, pytest.mark.s3]

SCRIPT = """
import os
names = sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"]))
print("shard", names)
ckpt = os.environ["SM_CHECKPOINT_DIR"]
print("restored", sorted(os.listdir(ckpt)))
open(os.path.join(ckpt, "epoch-2.pt"), "w").write("two")
os.remove(os.path.join(ckpt, "epoch-1.pt"))
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.bin"), "w").write("m")
"""


def test_channel_checkpoints_and_outputs_on_s3(
    tmp_path: Path, s3_bucket: str, s3_settings: Settings
) -> None:
    store = store_for(f"s3://{s3_bucket}/x", s3_settings)
    for i in range(4):
        store.put_bytes(f"s3://{s3_bucket}/data/part-{i}.csv", f"{i}\n".encode())
    store.put_bytes(f"s3://{s3_bucket}/ckpt/epoch-1.pt", b"one")
    job = make_job(
        tmp_path,
        {"train.py": SCRIPT},
        host="algo-2",
        hosts=["algo-1", "algo-2"],
        instance_count=2,
        output_prefix=f"s3://{s3_bucket}/jobs/job-1",
        inputs={"train": {"uri": f"s3://{s3_bucket}/data/", "distribution": "ShardedByKey"}},
        checkpoint={"uri": f"s3://{s3_bucket}/ckpt"},
    )
    result = job.agent(settings=s3_settings).run()
    assert result.outcome is HostOutcome.COMPLETED, job.reporter.lines()
    assert "shard ['part-1.csv', 'part-3.csv']" in job.reporter.lines("stdout")
    assert "restored ['epoch-1.pt']" in job.reporter.lines("stdout")
    keys = [info.key for info in store.list_objects(f"s3://{s3_bucket}/ckpt")]
    assert keys == [".trainops/manifest-algo-2.json", "epoch-2.pt"]  # the manifest: docs/spot.md
    part = store.get_bytes(f"s3://{s3_bucket}/jobs/job-1/output/model-parts/algo-2.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(part)) as tar:
        assert tar.getnames() == ["model.bin"]
    assert store.exists(f"s3://{s3_bucket}/jobs/job-1/logs/algo-2.log")
