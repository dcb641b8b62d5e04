"""Per-job keys on the served SeaweedFS: scoped to the job's own prefixes, refused outside them,
replaced by the next attempt's, refused once revoked, and kept across a restart of the server
for jobs that still run (``storage/_seaweed_identities.py``). Tried with a real weed and a real
S3 client, as a hostile script holding the key would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require
from trainops.agent.reporting._sync import DirectorySync
from trainops.storage import JobGrant
from trainops.storage._s3 import S3Store
from trainops.storage._seaweed import S3Server, find_weed
from trainops.storage._seaweed_identities import identity_actions
from trainops.storage._settings import S3Settings

pytestmark = pytest.mark.s3

TOKEN = "a-home-token-for-the-identity-tests"
GRANT = JobGrant(
    read=("s3://trainops/data/train/", "s3://trainops/code/j1/sourcedir.tar.gz"),
    write=("s3://trainops/jobs/j1", "s3://trainops/checkpoints/j1/"),
)

GRANT_A1 = JobGrant(write=("s3://trainops/jobs/a1",))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One SeaweedFS for the module (each test's jobs have names of their own)."""
    require("weed")
    server = S3Server(tmp_path_factory.mktemp("identities") / "home", TOKEN)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _client(s3: S3Settings) -> Any:
    import botocore.session  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _refused(call: Any, **kwargs: Any) -> str:
    """The error code S3 answers ``call`` with; fails the test when it succeeds."""
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    try:
        call(**kwargs)
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    raise AssertionError(f"{call.__name__}({kwargs}) was allowed")


def _seed(admin: Any) -> None:
    for key in ("data/train/part-0", "data/secret/part-0", "jobs/j2/output/model.tar.gz"):
        admin.put_object(Bucket="trainops", Key=key, Body=b"payload")


def test_a_job_key_reaches_its_own_prefixes_only(served: S3Server) -> None:
    admin = _client(served.settings)
    _seed(admin)
    job = _client(served.jobs.issue_key("j1", GRANT))
    # What it may do: read and list its channel, write, read back, list and delete its output.
    assert job.get_object(Bucket="trainops", Key="data/train/part-0")["Body"].read() == b"payload"
    listed = job.list_objects_v2(Bucket="trainops", Prefix="data/train/")
    assert [o["Key"] for o in listed["Contents"]] == ["data/train/part-0"]
    job.put_object(Bucket="trainops", Key="jobs/j1/output/model.tar.gz", Body=b"mine")
    job.put_object(Bucket="trainops", Key="checkpoints/j1/step-1", Body=b"mine")
    assert job.get_object(Bucket="trainops", Key="jobs/j1/output/model.tar.gz")["Body"].read()
    job.delete_object(Bucket="trainops", Key="checkpoints/j1/step-1")
    # What a hostile script holding it tries, refused.
    assert _refused(job.get_object, Bucket="trainops", Key="jobs/j2/output/model.tar.gz") == (
        "AccessDenied"
    )
    assert _refused(job.get_object, Bucket="trainops", Key="data/secret/part-0") == "AccessDenied"
    assert _refused(job.list_objects_v2, Bucket="trainops") == "AccessDenied"
    assert _refused(job.list_objects_v2, Bucket="trainops", Prefix="jobs/") == "AccessDenied"
    for key in ("jobs/j2/output/model.tar.gz", "jobs/j10/x", "data/train/part-1", "elsewhere"):
        assert _refused(job.put_object, Bucket="trainops", Key=key, Body=b"x") == "AccessDenied"
    assert _refused(job.delete_object, Bucket="trainops", Key="jobs/j2/output/model.tar.gz")
    copy = {
        "Bucket": "trainops",
        "Key": "jobs/j1/stolen",
        "CopySource": "trainops/data/secret/part-0",
    }
    assert _refused(job.copy_object, **copy) == "AccessDenied"
    assert _refused(job.create_bucket, Bucket="another") == "AccessDenied"
    assert _refused(job.put_object, Bucket="another", Key="x", Body=b"x") in {
        "AccessDenied",
        "NoSuchBucket",
    }
    batch = job.delete_objects(
        Bucket="trainops", Delete={"Objects": [{"Key": "jobs/j2/output/model.tar.gz"}]}
    )
    assert [e["Code"] for e in batch["Errors"]] == ["AccessDenied"]
    assert admin.get_object(Bucket="trainops", Key="jobs/j2/output/model.tar.gz")["Body"].read()


@pytest.mark.parametrize(("name", "slash"), [("j3", "/"), ("j4", "")])
def test_a_job_key_restores_from_its_empty_checkpoint_folder(
    served: S3Server, tmp_path: Path, name: str, slash: str
) -> None:
    """A first run's checkpoint folder is empty: its restore lists the folder and finds nothing.
    It must not look for an object of the folder's bare name (``checkpoints/j3``), which the
    job's key may not read (its grant is the folder): that refusal failed every such job."""
    folder = f"s3://trainops/checkpoints/{name}/"
    job = S3Store(served.jobs.issue_key(name, JobGrant(write=(folder,))))
    assert job.list_objects(folder) == []
    sync = DirectorySync(tmp_path / "ckpt", folder.rstrip("/") + slash, job, propagate_deletes=True)
    assert sync.restore() == 0
    admin = _client(served.settings)
    admin.put_object(Bucket="trainops", Key=f"checkpoints/{name}/step-1", Body=b"1")
    assert sync.restore() == 1
    assert (tmp_path / "ckpt" / "step-1").read_bytes() == b"1"


def test_a_new_attempts_key_replaces_the_last_and_a_revoked_key_is_refused(
    served: S3Server,
) -> None:
    first = served.jobs.issue_key("a1", GRANT_A1)
    second = served.jobs.issue_key("a1", GRANT_A1)
    assert second.access_key_id != first.access_key_id
    key = "jobs/a1/output/x"
    assert _refused(_client(first).put_object, Bucket="trainops", Key=key, Body=b"x") == (
        "InvalidAccessKeyId"
    )
    _client(second).put_object(Bucket="trainops", Key=key, Body=b"x")
    served.jobs.revoke("a1")
    assert "a1" not in served.jobs.jobs()
    assert _refused(_client(second).get_object, Bucket="trainops", Key=key) == (
        "InvalidAccessKeyId"
    )
    served.jobs.revoke("a1")  # twice: nothing to do
    # Revoked keys leave the identity file once weed applied it; the server's own stays first.
    names = [i["name"] for i in json.loads(served.identity_file.read_text())["identities"]]
    assert names[0] == "trainops" and "trainops-job-a1" not in names


@pytest.mark.slow
def test_running_jobs_keep_their_keys_across_a_restart_and_retain_ends_the_rest(
    tmp_path: Path,
) -> None:
    require("weed")
    home = tmp_path / "home"
    server = S3Server(home, TOKEN)
    server.start()
    try:
        running = server.jobs.issue_key("running", JobGrant(write=("s3://trainops/jobs/running",)))
        ended = server.jobs.issue_key("ended", JobGrant(write=("s3://trainops/jobs/ended",)))
    finally:
        server.stop()
    again = S3Server(home, TOKEN)
    again.start()
    try:  # (on another port where the last one is still taken)
        running, ended = (replace(s, endpoint_url=again.endpoint_url) for s in (running, ended))
        assert again.jobs.jobs() == ["ended", "running"]
        _client(ended).put_object(Bucket="trainops", Key="jobs/ended/x", Body=b"x")
        again.jobs.retain(["running"])
        assert again.jobs.jobs() == ["running"]
        _client(running).put_object(Bucket="trainops", Key="jobs/running/x", Body=b"x")
        assert _refused(
            _client(ended).put_object, Bucket="trainops", Key="jobs/ended/y", Body=b"x"
        ) == ("InvalidAccessKeyId")
    finally:
        again.stop()


def test_the_identity_file_is_private_and_no_key_is_in_a_repr(served: S3Server) -> None:
    issued = served.jobs.issue_key("p1", GRANT)
    assert served.identity_file.stat().st_mode & 0o077 == 0
    assert issued.secret_access_key is not None
    assert issued.secret_access_key not in repr(issued) + repr(served.jobs)
    env = served.jobs.issue("p1", GRANT)
    assert env["AWS_ENDPOINT_URL_S3"] == served.endpoint_url
    assert env["TRAINOPS_S3_SERVE"] == "0"  # the agent must not look for the server's key
    assert env["AWS_ACCESS_KEY_ID"] != served.access_key


def test_grants_become_weeds_patterns_write_folders_end_with_a_slash() -> None:
    grant = JobGrant(
        read=("s3://b/data/train", "s3://b/code/src.tar.gz", "s3://whole", "file:///tmp/x"),
        write=("s3://b/jobs/j1", "s3://b/ckpt/"),
    )
    assert identity_actions(grant, "b/.probe/j1") == [
        "Read:b/.probe/j1*",
        "Read:b/data/train*",
        "List:b/data/train*",
        "Read:b/code/src.tar.gz*",
        "List:b/code/src.tar.gz*",
        "Read:whole/*",
        "List:whole/*",
        "Write:b/jobs/j1/*",
        "Read:b/jobs/j1/*",
        "List:b/jobs/j1/*",
        "Write:b/ckpt/*",
        "Read:b/ckpt/*",
        "List:b/ckpt/*",
    ]


def test_a_job_key_cannot_widen_itself(served: S3Server) -> None:
    """weed's IAM and bucket-policy operations answer on its S3 port: a job's key may create no
    key or user, attach no policy, open no bucket and see no other job's keys."""
    import botocore.session  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    served.jobs.issue_key("w2", JobGrant(write=("s3://trainops/jobs/w2",)))
    s3 = served.jobs.issue_key("w1", JobGrant(write=("s3://trainops/jobs/w1",)))
    iam = botocore.session.get_session().create_client(
        "iam",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
        config=Config(retries={"max_attempts": 1}),
    )
    policy = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
        }
    )
    attempts = [
        (iam.create_access_key, {"UserName": "trainops-job-w1"}),
        (iam.create_user, {"UserName": "evil"}),
        (
            iam.put_user_policy,
            {"UserName": "trainops-job-w1", "PolicyName": "p", "PolicyDocument": policy},
        ),
        (iam.list_access_keys, {"UserName": "trainops-job-w2"}),
        (iam.list_users, {}),
    ]
    for call, kwargs in attempts:
        with pytest.raises(ClientError) as refused:
            call(**kwargs)
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403, call
    job = _client(s3)
    public = policy.replace(
        '"Resource": "*"', '"Principal": "*", "Resource": "arn:aws:s3:::trainops/*"'
    )
    assert _refused(job.put_bucket_policy, Bucket="trainops", Policy=public) == "AccessDenied"
    assert (
        _refused(job.put_bucket_acl, Bucket="trainops", ACL="public-read-write") == "AccessDenied"
    )


# A job script that looks past the S3 API: it finds every loopback port weed listens on (its
# process is the script's neighbour) and tries weed's own HTTP APIs on each.
_HOSTILE_SCRIPT = r"""
import json, os, subprocess, sys, threading, urllib.error, urllib.request
import psutil
import botocore.session
from botocore.config import Config

ports = sorted({c.laddr.port for c in psutil.Process(int(sys.argv[1])).net_connections("tcp")
                if c.status == psutil.CONN_LISTEN})
paths = ["/buckets/trainops/jobs/j2/output/model.tar.gz", "/buckets/trainops/?pretty=y",
         "/buckets/", "/dir/lookup?volumeId=1", "/dir/lookup?fileId=1,0100000000",
         "/vol/status", "/dir/assign", "/col/delete?collection=nothing", "/cluster/status"]
paths += [f"/{vid},{key:x}{cookie:08x}" for vid in range(1, 5) for key in (1, 2, 3)
          for cookie in (0, 1)]
found = []
for port in ports:
    for path in paths:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
                found.append([port, path, r.status, b"secret-of-j2" in r.read()])
        except urllib.error.HTTPError as exc:
            found.append([port, path, exc.code, b"secret-of-j2" in exc.read()])
        except Exception:  # a gRPC port: no HTTP/1 answer
            found.append([port, path, 0, False])
# weed's gRPC, through weed's own shell (the master's ports are in weed's command line). The
# shell retries a master that refuses it once a second for ever, saying so at -v=1: its first
# refusal ends it (20 s at most), and everything it printed until then is kept.
flags = dict(a.lstrip("-").split("=", 1) for a in psutil.Process(int(sys.argv[1])).cmdline()
             if a.startswith("-master.port"))
master = f"127.0.0.1:{flags['master.port']}.{flags['master.port.grpc']}"
shell = subprocess.Popen([sys.argv[2], f"-logdir={os.getcwd()}", "-v=1", "shell", "-debug",
                          f"-master={master}"], cwd=os.getcwd(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
shell.stdin.write("fs.ls -l /buckets/trainops/jobs/j2/output\n")
shell.stdin.close()
limit = threading.Timer(20, shell.kill)
limit.start()
grpc = ""
for line in shell.stdout:
    grpc += line
    if "failed to connect with master" in line:
        break
shell.kill()
shell.wait()
limit.cancel()
s3 = botocore.session.get_session().create_client(
    "s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
s3.put_object(Bucket="trainops", Key="jobs/j3/output/mine", Body=b"mine")
own = s3.get_object(Bucket="trainops", Key="jobs/j3/output/mine")["Body"].read().decode()
print(json.dumps({"ports": ports, "found": found, "own": own, "grpc": grpc}))
"""


def test_a_script_that_finds_weeds_other_ports_reads_nothing_through_them(
    served: S3Server, tmp_path: Path
) -> None:
    import subprocess
    import sys

    admin = _client(served.settings)
    admin.put_object(Bucket="trainops", Key="jobs/j2/output/model.tar.gz", Body=b"secret-of-j2")
    key = served.jobs.issue_key("j3", JobGrant(write=("s3://trainops/jobs/j3",)))
    script = tmp_path / "hostile.py"
    script.write_text(_HOSTILE_SCRIPT)
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_ACCESS_KEY_ID": key.access_key_id,
        "AWS_SECRET_ACCESS_KEY": key.secret_access_key,
        "S3_ENDPOINT": key.endpoint_url,
    }
    done = subprocess.run(
        [sys.executable, str(script), str(served.pid), str(find_weed())],
        env={**env, "HOME": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(done.stdout)
    assert len(report["ports"]) >= 8  # master, volume, filer, S3: HTTP and gRPC each
    assert report["own"] == "mine"  # S3 with the job's own key still works
    leaked = [hit for hit in report["found"] if hit[3]]
    answered = {hit[1] for hit in report["found"] if 200 <= hit[2] < 300}
    assert leaked == []
    # Only the master's cluster status (which master leads, its peers) answers: no data.
    assert answered <= {"/cluster/status"}
    # The volume server is there and refuses reads without weed's JWT, whatever the file id.
    volume_reads = [hit for hit in report["found"] if hit[1].startswith("/1,") and hit[2] == 401]
    assert volume_reads
    # weed's gRPC ports take only the certificate trainops made: its shell is refused and
    # learns nothing.
    assert "model.tar.gz" not in report["grpc"], report["grpc"][-300:]
    assert "failed to connect with master" in report["grpc"], report["grpc"][-300:]
    assert admin.get_object(Bucket="trainops", Key="jobs/j2/output/model.tar.gz")["Body"].read()


def test_weeds_signing_keys_are_private_and_never_logged(served: S3Server) -> None:
    import re

    toml = served.root / "security.toml"
    assert toml.stat().st_mode & 0o777 == 0o600
    keys = re.findall(r'key = "([0-9a-f]{64})"', toml.read_text())
    assert len(set(keys)) == 4
    tls = served.root / "tls"
    assert {p.name for p in tls.iterdir()} >= {"ca.crt", "weed.crt", "weed.key"}
    assert "ca.key" not in {p.name for p in tls.iterdir()}
    assert tls.stat().st_mode & 0o777 == 0o700
    log = served.log_path.read_text(errors="replace")
    assert [k for k in keys if k in log] == []
