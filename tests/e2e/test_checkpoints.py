"""End to end: checkpoints are restored at start, uploaded while running, and resume a new job."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow

RESUMING = """
import os, sys, time
ck = os.environ["SM_CHECKPOINT_DIR"]
done = sorted(int(f.split("-")[1]) for f in os.listdir(ck) if f.startswith("step-"))
start = done[-1] + 1 if done else 0
print("resumed at", start, flush=True)
for step in range(start, start + 3):
    tmp = os.path.join(ck, f".step-{step}.tmp")
    open(tmp, "w").write(str(step))
    os.replace(tmp, os.path.join(ck, f"step-{step}"))
    if step >= 2:
        os.remove(os.path.join(ck, f"step-{step - 2}"))
    time.sleep(0.3)
"""


def test_second_job_resumes_from_the_first_ones_checkpoints(tmp_path: Path) -> None:
    spec = write_job(tmp_path, RESUMING, checkpoint={"uri": "ckpt/"})
    home = tmp_path / "home"
    first = trainops("run", str(spec), home=home)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "resumed at 0" in first.stdout
    remote = tmp_path / "ckpt"
    # .trainops/ holds the host's checkpoint manifest (docs/spot.md#checkpoints).
    assert sorted(p.name for p in remote.iterdir()) == [".trainops", "step-1", "step-2"]
    second = trainops("run", str(spec), home=home)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed at 3" in second.stdout
    assert sorted(p.name for p in remote.iterdir()) == [".trainops", "step-4", "step-5"]
    assert [p.name for p in (remote / ".trainops").iterdir()] == ["manifest-algo-1.json"]


def test_digits_example_trains_and_resumes(tmp_path: Path, backend: dict[str, str]) -> None:
    import shutil
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[2] / "examples" / "digits"
    work = tmp_path / "digits"
    shutil.copytree(example, work, ignore=shutil.ignore_patterns("data", "checkpoints"))
    subprocess.run([sys.executable, str(work / "prepare_data.py")], check=True, cwd=work)
    home = tmp_path / "home"
    result = trainops("run", str(work / "job.yaml"), home=home, timeout=400, **backend)
    assert result.returncode == 0, result.stdout + result.stderr
    name = next(line.split()[-1] for line in result.stdout.splitlines() if "Submitted" in line)
    job = describe(name, home, **backend)
    metrics = {m["MetricName"]: m["Value"] for m in job["FinalMetricDataList"]}
    assert metrics["test_accuracy"] > 0.9  # chance is 0.1
    again = trainops("run", str(work / "job.yaml"), home=home, timeout=400, **backend)
    assert again.returncode == 0
    assert "resumed from epoch" in again.stdout
