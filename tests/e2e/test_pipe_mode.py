"""End to end: a Pipe-mode channel through `trainops run`, read by the script epoch after epoch.

The script knows nothing of trainops: it reads ``inputdataconfig.json`` and the FIFOs
``$SM_INPUT_DIR/data/train_<epoch>`` as it would on SageMaker, and checks each epoch's bytes
(RecordIO records, reshuffled every epoch by ShuffleConfig) against what it was told to expect.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow

READS_TWO_EPOCHS = """
import hashlib, json, os, struct, time
config = json.load(open(os.environ["SM_INPUT_CONFIG_DIR"] + "/inputdataconfig.json"))["train"]
assert config["TrainingInputMode"] == "Pipe" and config["RecordWrapperType"] == "RecordIO"
assert config["ShuffleConfig"] == {"Seed": 11}, config
expected = json.loads(os.environ["SM_HP_EXPECTED"])
orders = []
for epoch in range(2):
    path = os.path.join(os.environ["SM_INPUT_DIR"], "data", f"train_{epoch}")
    deadline = time.monotonic() + 120  # as SageMaker's readers do: wait for the FIFO to appear
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"no {path}"
        time.sleep(0.01)
    records = []
    with open(path, "rb") as fifo:
        while header := fifo.read(8):
            magic, length = struct.unpack("<II", header)
            assert magic == 0xCED7230A, hex(magic)
            records.append(hashlib.sha256(fifo.read(length)).hexdigest())
            fifo.read(-length % 4)
    assert sorted(records) == sorted(expected), (epoch, records)
    orders.append(records)
    print(f"epoch {epoch}: {len(records)} records ok", flush=True)
assert orders[0] != orders[1], "ShuffleConfig reshuffles every epoch"
print("pipe mode ok", flush=True)
"""


def test_a_script_reads_two_epochs_of_a_pipe_channel(tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    payloads = [bytes([i]) * (1000 * i + i) for i in range(1, 13)]
    for i, payload in enumerate(payloads):
        (data / f"part-{i:02d}.bin").write_bytes(payload)
    expected = [hashlib.sha256(p).hexdigest() for p in payloads]
    spec = write_job(
        tmp_path,
        READS_TWO_EPOCHS,
        job_name="pipe-job",
        hyperparameters={"expected": json.dumps(expected)},
        inputs={
            "train": {
                "uri": str(data),
                "mode": "Pipe",
                "record_wrapping": "RecordIO",
                "shuffle_seed": 11,
            }
        },
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[algo-1] epoch 0: 12 records ok" in result.stdout
    assert "[algo-1] epoch 1: 12 records ok" in result.stdout
    assert "[algo-1] pipe mode ok" in result.stdout
    assert describe("pipe-job", home)["TrainingJobStatus"] == "Completed"
