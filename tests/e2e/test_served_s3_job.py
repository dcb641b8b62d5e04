"""End to end on the S3 server a `trainops server` supervises (TRAINOPS_S3_SERVE=1, i.e. --s3):
code and channel uploaded by an AWS SDK client to it, the job reads them and writes its model
to the default bucket, and the S3 server stops with the control plane."""

from __future__ import annotations

import io
import json
import socket
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._support.system import require
from tests.e2e._harness import Server, describe, trainops, wait_for
from trainops.storage._seaweed import read_client_file

pytestmark = [pytest.mark.slow, pytest.mark.s3]

TRAIN = """
import json, os
channel = os.environ["SM_CHANNEL_TRAIN"]
total = sum(int(open(os.path.join(channel, n)).read()) for n in sorted(os.listdir(channel)))
print(f"total={total}", flush=True)
json.dump({"total": total}, open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w"))
"""


def _sourcedir(script: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = script.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _client(home: Path) -> Any:
    import botocore.session  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    s3 = read_client_file(home)
    assert s3 is not None
    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
        config=Config(s3={"addressing_style": "path"}),
    )


def test_a_job_reads_code_and_data_from_the_served_s3_and_writes_its_model_there(
    tmp_path: Path,
) -> None:
    require("weed")
    home = tmp_path / "home"
    server = Server(home, TRAINOPS_S3_SERVE="1").start()
    try:
        s3_settings = wait_for(lambda: read_client_file(home), timeout=120)
        s3 = _client(home)
        s3.put_object(Bucket="trainops", Key="code/sourcedir.tar.gz", Body=_sourcedir(TRAIN))
        for i in range(3):
            s3.put_object(Bucket="trainops", Key=f"data/train/part-{i}", Body=str(i + 1).encode())
        spec = tmp_path / "job.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "job_name": "served-s3",
                    "entry_point": "train.py",
                    "source_dir": "s3://trainops/code/sourcedir.tar.gz",
                    "inputs": {"train": {"uri": "s3://trainops/data/train/"}},
                }
            )
        )
        # The CLI is given no S3 settings: it finds the server and its S3 through the home.
        result = trainops("run", str(spec), home=home, **server.env())
        assert result.returncode == 0, result.stdout + result.stderr
        assert "total=6" in result.stdout
        job = describe("served-s3", home, **server.env())
        model_uri = job["ModelArtifacts"]["S3ModelArtifacts"]
        assert model_uri == "s3://trainops/jobs/served-s3/output/model.tar.gz"
        body = s3.get_object(Bucket="trainops", Key="jobs/served-s3/output/model.tar.gz")
        with tarfile.open(fileobj=io.BytesIO(body["Body"].read()), mode="r:gz") as tar:
            handle = tar.extractfile("model.json")
            assert handle is not None and json.load(handle) == {"total": 6}
        assert s3_settings.secret_access_key not in json.dumps(job)
    finally:
        server.stop()
    logs = "".join(p.read_text(errors="replace") for p in home.glob("server-*.log"))
    assert "S3 (SeaweedFS) on http://127.0.0.1:" in logs
    assert s3_settings.secret_access_key not in logs
    assert read_client_file(home) is None  # withdrawn, and its S3 server is gone with it
    port = int(str(s3_settings.endpoint_url).rsplit(":", 1)[1])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
