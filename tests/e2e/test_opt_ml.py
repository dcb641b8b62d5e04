"""End to end: channels shown through the hosts' private namespaces, and the real /opt/ml.

A script that hard-codes ``/opt/ml`` runs unchanged on two hosts at once (``mount_opt_ml``),
each seeing its own tree there, its own share of a FastFile channel and a read-only
file-system channel; the machine's ``/opt`` is the same before and after. A single-host job
reads a file-system channel through its namespace too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow

HARD_CODES_OPT_ML = """
import errno, hashlib, json, os, sys, time
res = json.load(open("/opt/ml/input/config/resourceconfig.json"))
me, hosts = res["current_host"], res["hosts"]
assert os.getcwd() == "/opt/ml/code", os.getcwd()
for name, path in [("SM_MODEL_DIR", "/opt/ml/model"), ("SM_INPUT_DIR", "/opt/ml/input"),
                   ("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"),
                   ("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data")]:
    assert os.environ[name] == path, (name, os.environ[name])
expected = json.loads(os.environ["SM_HP_EXPECTED"])
seen = {}
for dirpath, _dirs, names in os.walk("/opt/ml/input/data/train"):
    for n in names:
        seen[n] = hashlib.sha256(open(os.path.join(dirpath, n), "rb").read()).hexdigest()
assert all(expected[n] == d for n, d in seen.items()), seen
assert sorted(os.listdir("/opt/ml/input/data/shared")) == ["labels.txt"]
for channel in ("train", "shared"):
    try:
        open(f"/opt/ml/input/data/{channel}/new", "w")
        sys.exit(f"{channel}: a read-only channel took a write")
    except OSError as exc:
        assert exc.errno == errno.EROFS, exc
with open("/opt/ml/output/data/who.txt", "w") as f:
    f.write(me)
with open("/opt/ml/model/weights.txt", "w") as f:
    f.write(me)
rendezvous = os.environ["SM_HP_RENDEZVOUS"]
open(os.path.join(rendezvous, me), "w").close()
deadline = time.time() + 60
while sorted(os.listdir(rendezvous)) != sorted(hosts):  # both hosts run at this moment
    assert time.time() < deadline, os.listdir(rendezvous)
    time.sleep(0.05)
assert open("/opt/ml/output/data/who.txt").read() == me  # not the other host's file
print(f"{me}: /opt/ml ok, {len(seen)} files: {json.dumps(sorted(seen))}", flush=True)
"""


def _opt_listing() -> list[tuple[str, int]]:
    opt = Path("/opt")
    if not opt.is_dir():
        return []
    entries = sorted((p.name, p.lstat().st_mtime_ns) for p in opt.iterdir())
    return [(str(opt), opt.stat().st_mtime_ns), *entries]  # /opt's own time: nothing added


def test_two_hosts_see_their_own_tree_at_opt_ml(tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    files = {f"sample-{i:02d}.bin": os.urandom(1000 + i) for i in range(8)}
    for name, payload in files.items():
        (data / name).write_bytes(payload)
    shared = tmp_path / "efs"
    shared.mkdir()
    (shared / "labels.txt").write_text("cat\ndog\n")
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    expected = {name: hashlib.sha256(p).hexdigest() for name, p in files.items()}
    spec = write_job(
        tmp_path,
        HARD_CODES_OPT_ML,
        job_name="opt-ml-job",
        instance_count=2,
        mount_opt_ml=True,
        hyperparameters={"expected": json.dumps(expected), "rendezvous": str(rendezvous)},
        inputs={
            "train": {"uri": str(data), "mode": "FastFile", "distribution": "ShardedByKey"},
            "shared": {"file_system": {"directory_path": str(shared)}},
        },
    )
    before = _opt_listing()
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    shares = []
    for host in ("algo-1", "algo-2"):
        line = next(x for x in result.stdout.splitlines() if f"[{host}] {host}: /opt/ml ok" in x)
        shares.append(set(json.loads(line.split(" files: ", 1)[1])))
    assert shares[0] | shares[1] == set(files) and not shares[0] & shares[1]
    assert describe("opt-ml-job", home)["TrainingJobStatus"] == "Completed"
    assert _opt_listing() == before  # nothing written to the machine's /opt
    assert not Path("/opt/ml").exists() or ("ml", Path("/opt/ml").lstat().st_mtime_ns) in before
    assert not (data / "new").exists() and not (shared / "new").exists()


READS_A_FILE_SYSTEM = """
import errno, os
root = os.environ["SM_CHANNEL_REFS"]
assert open(os.path.join(root, "a.txt")).read() == "shared\\n"
try:
    open(os.path.join(root, "b.txt"), "w")
    raise SystemExit("wrote into a read-only channel")
except OSError as exc:
    assert exc.errno == errno.EROFS, exc
out = os.environ["SM_CHANNEL_SCRATCH"]
with open(os.path.join(out, "from-the-job.txt"), "w") as f:
    f.write("rw")
print("file-system channels ok", flush=True)
"""


def test_a_single_host_job_reads_file_system_channels(tmp_path: Path) -> None:
    refs, scratch = tmp_path / "refs", tmp_path / "scratch"
    refs.mkdir()
    scratch.mkdir()
    (refs / "a.txt").write_text("shared\n")
    spec = write_job(
        tmp_path,
        READS_A_FILE_SYSTEM,
        job_name="fs-job",
        inputs={
            "refs": {"file_system": {"directory_path": str(refs)}},
            "scratch": {"file_system": {"directory_path": str(scratch), "access_mode": "rw"}},
        },
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[algo-1] file-system channels ok" in result.stdout
    assert (scratch / "from-the-job.txt").read_text() == "rw"
    assert sorted(p.name for p in refs.iterdir()) == ["a.txt"]
