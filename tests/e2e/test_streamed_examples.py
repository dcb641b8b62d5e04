"""The digits example streamed: Pipe mode (RecordIO through the channel's FIFOs) and packed
shards (StreamingDataset), each trained to File mode's accuracy by ``trainops run``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("streamed") / "digits"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("data", "checkpoints"))
    subprocess.run([sys.executable, str(work / "prepare_data.py")], check=True, cwd=work)
    return work


@pytest.mark.slow
@pytest.mark.parametrize("job", ["job-pipe.yaml", "job-shards.yaml"])
def test_a_streamed_digits_job_reaches_file_modes_accuracy(
    example: Path, job: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = trainops("run", str(example / job), home=home, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    name = next(line.split()[-1] for line in result.stdout.splitlines() if "Submitted" in line)
    job_record = describe(name, home)
    metrics = {m["MetricName"]: m["Value"] for m in job_record["FinalMetricDataList"]}
    assert metrics["test_accuracy"] > 0.9  # chance is 0.1; File mode reaches about 0.97
    if job == "job-pipe.yaml":
        assert "Channel 'train': epoch 9 done" in result.stdout  # ten epochs, ten FIFOs
