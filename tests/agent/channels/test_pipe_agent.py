"""Pipe channels through the host agent: a real script reads its FIFOs, a channel that fails while
the script runs fails the host with the channel's reason, a stop ends a blocked reader cleanly."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from pathlib import Path

from tests.agent._support import make_job
from trainops.agent import HostResult
from trainops.protocol import Command, HostOutcome

SCRIPT = """
import hashlib, json, os, sys, time
data = os.environ["SM_INPUT_DIR"] + "/data"
config = json.load(open(os.environ["SM_INPUT_CONFIG_DIR"] + "/inputdataconfig.json"))
assert config["train"]["TrainingInputMode"] == "Pipe", config
assert not os.path.exists(data + "/train"), "a Pipe channel has no directory"
for epoch in range(int(os.environ["SM_HP_EPOCHS"])):
    path = f"{data}/train_{epoch}"
    while not os.path.exists(path):
        time.sleep(0.01)
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as fifo:
        while chunk := fifo.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    print(f"epoch {epoch}: {size} bytes sha256 {digest.hexdigest()}", flush=True)
"""

HOLDS_THE_FIFO = """
import os, time
path = os.environ["SM_INPUT_DIR"] + "/data/train_0"
while not os.path.exists(path):
    time.sleep(0.01)
fifo = open(path, "rb")
fifo.read(10)
print("holding the fifo", flush=True)
while True:  # reads no more: the writer waits for room in a full pipe
    time.sleep(0.05)
"""


def _data(tmp_path: Path, objects: dict[str, bytes]) -> str:
    root = tmp_path / "dataset"
    root.mkdir()
    for key, body in objects.items():
        (root / key).write_bytes(body)
    return root.as_uri()


def _pipe_input(uri: str, **fields: object) -> dict[str, dict[str, object]]:
    return {"train": {"uri": uri, "mode": "Pipe", **fields}}


def test_a_script_reads_two_epochs_from_its_fifos(tmp_path: Path) -> None:
    objects = {f"part-{i}": bytes([i]) * (100_000 * (i + 1)) for i in range(4)}
    uri = _data(tmp_path, objects)
    job = make_job(
        tmp_path, {"train.py": SCRIPT}, inputs=_pipe_input(uri), hyperparameters={"epochs": 2}
    )
    result = job.run()
    assert result.outcome is HostOutcome.COMPLETED, result
    whole = b"".join(objects[k] for k in sorted(objects))
    line = f"{len(whole)} bytes sha256 {hashlib.sha256(whole).hexdigest()}"
    stdout = job.reporter.lines("stdout")
    assert f"epoch 0: {line}" in stdout and f"epoch 1: {line}" in stdout
    assert not list((job.root / "input" / "data").iterdir())  # FIFOs removed after the job


def test_a_channel_that_fails_mid_stream_fails_the_host(tmp_path: Path) -> None:
    uri = _data(tmp_path, {"a.gz": gzip.compress(b"fine"), "b.gz": b"\x1f\x8b\x08 not gzip"})
    job = make_job(
        tmp_path,
        {"train.py": SCRIPT},
        inputs=_pipe_input(uri, compression="Gzip"),
        hyperparameters={"epochs": 1},
    )
    result = job.run()  # the script sees an early EOF and exits 0
    assert result.outcome is HostOutcome.FAILED
    assert result.failure_reason is not None
    assert result.failure_reason.startswith("Pipe channel 'train', epoch 0: file://")
    assert "b.gz: not a valid gzip stream" in result.failure_reason
    failure_file = job.root / "output" / "failure"
    assert failure_file.read_text() == result.failure_reason


def test_a_stop_while_the_script_holds_a_full_fifo_ends_cleanly(tmp_path: Path) -> None:
    uri = _data(tmp_path, {"big": b"b" * (16 << 20)})
    job = make_job(tmp_path, {"train.py": HOLDS_THE_FIFO}, inputs=_pipe_input(uri))
    results: list[HostResult] = []
    runner = threading.Thread(target=lambda: results.append(job.run()))
    runner.start()
    job.reporter.wait_for_line("holding the fifo")
    job.reporter.push(Command("stop", reason="user asked", grace_seconds=5))
    runner.join(60)
    assert not runner.is_alive()
    [result] = results
    assert result.outcome is HostOutcome.STOPPED
    assert not list((job.root / "input" / "data").iterdir())


def test_a_bad_manifest_fails_the_host_before_the_script(tmp_path: Path) -> None:
    manifest = tmp_path / "list.json"
    manifest.write_text(json.dumps([{"prefix": (tmp_path / "x").as_uri() + "/"}, "../up"]))
    job = make_job(
        tmp_path,
        {"train.py": "open('started', 'w')\n"},
        inputs=_pipe_input(manifest.as_uri(), s3_data_type="ManifestFile"),
    )
    result = job.run()
    assert result.outcome is HostOutcome.FAILED
    assert result.failure_reason == (
        f"StorageError: manifest {manifest.as_uri()}: entry 1 ('../up'): a key may not be "
        "absolute nor contain '..' (it would leave the prefix)"
    )
    assert not (job.root / "code" / "started").exists()
