"""On a machine with an NVIDIA GPU: a tuning job whose trials train on CUDA. The trials ask for a
one-GPU instance each, so with fewer GPUs than the tuning job's parallelism the local backend
must run them no more at a time than there are GPUs, each with its own GPU visible, and every
trial still ends Completed with its objective.

Skipped where there is no CUDA GPU (CI has none); run on a GPU machine with
``pytest tests/gpu``.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from tests.e2e._harness import trainops
from tests.gpu.test_gpu_job import NEEDS_GPU

pytestmark = pytest.mark.slow

SCRIPT = """
import argparse, os
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
parser.add_argument("--epochs", type=int)
args, _ = parser.parse_known_args()
assert torch.cuda.is_available(), os.environ.get("CUDA_VISIBLE_DEVICES")
print("visible", os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ["SM_NUM_GPUS"], flush=True)
x = torch.randn(2048, 2048, device="cuda")
for epoch in range(1, args.epochs + 1):
    for _ in range(50):
        y = x @ x
    torch.cuda.synchronize()
    print(f"epoch={epoch} loss={abs(args.lr - 0.01) + 1.0 / epoch:.6f}", flush=True)
"""


def _gpus() -> int:
    listed = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True)
    return len([line for line in listed.stdout.splitlines() if line.startswith("GPU ")])


@NEEDS_GPU
def test_trials_on_one_gpu_instances_share_the_machine_s_gpus_one_each(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    gpus = _gpus()
    doc = {
        "tuning_job_name": "on-the-gpus",
        "strategy": "Random",
        "random_seed": 5,
        "training_job": {
            "entry_point": "train.py", "source_dir": "src", "instance_type": "ml.g5.xlarge",
            "hyperparameters": {"epochs": 3},
            "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}],
        },
        "objective": {"metric_name": "loss", "type": "Minimize"},
        "hyperparameter_ranges": {"lr": {"type": "Continuous", "min_value": 0.001,
                                         "max_value": 0.1, "scaling_type": "Logarithmic"}},
        "resource_limits": {"max_number_of_training_jobs": gpus + 2,
                            "max_parallel_training_jobs": gpus + 1},
    }  # fmt: skip
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    home = tmp_path / "home"

    result = trainops("tune", str(path), home=home, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    described = json.loads(trainops("tuning", "describe", "on-the-gpus", home=home).stdout)
    assert described["TrainingJobStatusCounters"]["Completed"] == gpus + 2, described
    rows = list(csv.DictReader(io.StringIO(trainops("tuning", "export", "on-the-gpus",
                                                    home=home).stdout)))  # fmt: skip
    assert all(float(r["FinalObjectiveValue"]) > 0 for r in rows)
    # never more trials training at once than there are GPUs
    spans = sorted(
        (
            datetime.fromisoformat(r["TrainingStartTime"]),
            datetime.fromisoformat(r["TrainingEndTime"]),
        )
        for r in rows
    )
    for index, (start, _) in enumerate(spans):
        running = sum(1 for s, e in spans[: index + 1] if s <= start < e)
        assert running <= gpus, spans
    for row in rows:
        log = trainops("logs", row["TrainingJobName"], home=home).stdout
        [line] = [ln.split("visible ", 1)[1] for ln in log.splitlines() if "visible " in ln]
        visible, count = line.split()
        assert count == "1" and visible.isdigit() and int(visible) < gpus, line
