"""End to end on the S3 server a `trainops server` supervises (TRAINOPS_S3_SERVE=1, i.e. --s3):
code and channel uploaded by an AWS SDK client to it, the job reads them and writes its model
to the default bucket, a hostile job holds its own key only, and the S3 server stops with the
control plane.

One server serves the module (its start, the server's and weed's, is most of a test's time):
the jobs have names and prefixes of their own, and the last test stops it, checking what the
stop does and that no secret any test saw is in the server's log.
"""

from __future__ import annotations

import io
import json
import socket
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._support.system import require
from tests.e2e._harness import Server, describe, trainops, wait_for
from trainops._settings import S3Settings
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


@dataclass
class Served:
    """The module's server, its S3 as ``client.json`` advertises it, and every secret a test
    saw (the last test checks that none of them is in the server's log)."""

    home: Path
    server: Server
    s3: S3Settings
    secrets: list[str] = field(default_factory=list)

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.home.glob("server-*.log"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require("weed")
    home = tmp_path_factory.mktemp("served-s3") / "home"
    server = Server(home, TRAINOPS_S3_SERVE="1").start()
    try:
        s3 = wait_for(lambda: read_client_file(home), timeout=120)
        assert s3.secret_access_key is not None
        yield Served(home, server, s3, [s3.secret_access_key])
    finally:
        server.stop()


def test_a_job_reads_code_and_data_from_the_served_s3_and_writes_its_model_there(
    served: Served, tmp_path: Path
) -> None:
    s3 = _client(served.home)
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
    result = trainops("run", str(spec), home=served.home, **served.server.env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "total=6" in result.stdout
    job = describe("served-s3", served.home, **served.server.env())
    model_uri = job["ModelArtifacts"]["S3ModelArtifacts"]
    assert model_uri == "s3://trainops/jobs/served-s3/output/model.tar.gz"
    body = s3.get_object(Bucket="trainops", Key="jobs/served-s3/output/model.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(body["Body"].read()), mode="r:gz") as tar:
        handle = tar.extractfile("model.json")
        assert handle is not None and json.load(handle) == {"total": 6}
    assert str(served.s3.secret_access_key) not in json.dumps(job)


HOSTILE = """
import json, os
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

s3 = botocore.session.get_session().create_client(
    "s3",
    endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"],
    region_name=os.environ["AWS_DEFAULT_REGION"],
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
)


def attempt(call, **kwargs):
    try:
        call(**kwargs)
    except ClientError as exc:
        return exc.response["Error"]["Code"]
    return "allowed"


victim = "jobs/victim/output/model.tar.gz"
results = {
    "read another job's output": attempt(s3.get_object, Bucket="trainops", Key=victim),
    "list the bucket": attempt(s3.list_objects_v2, Bucket="trainops"),
    "list the jobs": attempt(s3.list_objects_v2, Bucket="trainops", Prefix="jobs/"),
    "overwrite another job's output": attempt(s3.put_object, Bucket="trainops", Key=victim, Body=b"x"),
    "write beside its output": attempt(s3.put_object, Bucket="trainops", Key="jobs/hostile2/x", Body=b"x"),
    "write into its channel": attempt(s3.put_object, Bucket="trainops", Key="data/train/x", Body=b"x"),
    "read its channel": attempt(s3.get_object, Bucket="trainops", Key="data/train/part-0"),
    "write its output": attempt(s3.put_object, Bucket="trainops", Key="jobs/hostile/own", Body=b"ok"),
}
model = os.environ["SM_MODEL_DIR"]
json.dump(results, open(os.path.join(model, "results.json"), "w"))
stolen = {"key": os.environ["AWS_ACCESS_KEY_ID"], "secret": os.environ["AWS_SECRET_ACCESS_KEY"]}
json.dump(stolen, open(os.path.join(model, "stolen.json"), "w"))
"""


def _model_file(s3: Any, job: str, name: str) -> Any:
    body = s3.get_object(Bucket="trainops", Key=f"jobs/{job}/output/model.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(body["Body"].read()), mode="r:gz") as tar:
        handle = tar.extractfile(name)
        assert handle is not None
        return json.load(handle)


def test_a_hostile_script_holds_its_own_jobs_key_only_and_loses_it_when_the_job_ends(
    served: Served, tmp_path: Path
) -> None:
    """The script's S3 key is its job's own: its channel and output prefix, nothing of another
    job's or of the bucket besides; and the key it stole is refused once its job has ended."""
    from botocore.config import Config  # type: ignore[import-untyped]
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    home, admin_settings = served.home, served.s3
    s3 = _client(home)
    s3.put_object(Bucket="trainops", Key="code/hostile.tar.gz", Body=_sourcedir(HOSTILE))
    s3.put_object(Bucket="trainops", Key="data/train/part-0", Body=b"1")
    s3.put_object(Bucket="trainops", Key="jobs/victim/output/model.tar.gz", Body=b"secret")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "job_name": "hostile",
                "entry_point": "train.py",
                "source_dir": "s3://trainops/code/hostile.tar.gz",
                "inputs": {"train": {"uri": "s3://trainops/data/train/"}},
            }
        )
    )
    result = trainops("run", str(spec), home=home, **served.server.env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert _model_file(s3, "hostile", "results.json") == {
        "read another job's output": "AccessDenied",
        "list the bucket": "AccessDenied",
        "list the jobs": "AccessDenied",
        "overwrite another job's output": "AccessDenied",
        "write beside its output": "AccessDenied",
        "write into its channel": "AccessDenied",
        "read its channel": "allowed",
        "write its output": "allowed",
    }
    victim = s3.get_object(Bucket="trainops", Key="jobs/victim/output/model.tar.gz")
    assert victim["Body"].read() == b"secret"
    stolen = _model_file(s3, "hostile", "stolen.json")
    served.secrets.append(stolen["secret"])
    assert stolen["key"] != admin_settings.access_key_id
    import botocore.session  # type: ignore[import-untyped]

    thief = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=admin_settings.endpoint_url,
        region_name=admin_settings.region,
        aws_access_key_id=stolen["key"],
        aws_secret_access_key=stolen["secret"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    # The job has ended (the CLI returned its outcome): its key is already refused.
    with pytest.raises(ClientError) as refused:
        thief.get_object(Bucket="trainops", Key="jobs/hostile/own")
    assert refused.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    assert stolen["secret"] not in json.dumps(describe("hostile", home, **served.server.env()))


def test_the_s3_server_stops_with_the_control_plane_and_no_secret_is_in_its_log(
    served: Served,
) -> None:
    """Last in the module: it stops the module's server."""
    served.server.stop()
    logs = served.logs()
    assert "S3 (SeaweedFS) on http://127.0.0.1:" in logs
    assert [s for s in served.secrets if s in logs] == []
    assert read_client_file(served.home) is None  # withdrawn, and its S3 server is gone with it
    port = int(str(served.s3.endpoint_url).rsplit(":", 1)[1])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
