"""End to end with the real agent: a spot job interrupted by its chaos schedule resumes from its
synced checkpoint, and `trainops run` ends with the SDK's spot lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow

# Counts to STEPS, a checkpoint per step (written whole: temp file, then rename), resuming from
# the newest one it finds; on SIGTERM (the interruption's notice) it writes one last checkpoint.
COUNTING = """
import os, signal, sys, time
ck = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
done = sorted(int(f.split("-")[1]) for f in os.listdir(ck) if f.startswith("step-"))
step = done[-1] + 1 if done else 0
print("resumed at", step, "from", ck, flush=True)

def save(n):
    tmp = os.path.join(ck, f".step-{n}.tmp")
    with open(tmp, "w") as f:
        f.write(str(n))
    os.replace(tmp, os.path.join(ck, f"step-{n}"))

def noticed(signum, frame):
    print("notice at", step, flush=True)
    sys.exit(0)

signal.signal(signal.SIGTERM, noticed)
while step < 12:
    save(step)
    step += 1
    time.sleep(0.25)
print("done", flush=True)
"""


def test_an_interrupted_spot_job_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        COUNTING,
        checkpoint={"uri": "ckpt/"},
        use_spot_instances=True,
        stopping_condition={"max_runtime_in_seconds": 120, "max_wait_time_in_seconds": 300},
        chaos={"seed": 3, "interruptions": 1, "mean_seconds_between": 1.0, "notice_seconds": 5},
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, timeout=300)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    resumed = [int(n) for n in re.findall(r"resumed at (\d+)", out)]
    assert resumed[0] == 0 and len(resumed) == 2 and resumed[1] > 0, out
    assert "notice at" in out and "done" in out
    assert "Interruptions: 1" in out and "Managed Spot Training savings: " in out
    name = next(line.split()[-1] for line in out.splitlines() if "Submitted" in line)
    job = describe(name, home)
    statuses = [t["Status"] for t in job["SecondaryStatusTransitions"]]
    assert statuses[statuses.index("Interrupted") + 1] == "Starting", statuses
    assert (job["Interruptions"], job["Attempt"]) == (1, 2)
    assert job["BillableTimeInSeconds"] <= job["TrainingTimeInSeconds"]
    synced = [int(p.name.split("-")[1]) for p in (tmp_path / "ckpt").glob("step-*")]
    assert max(synced) == 11 and resumed[1] - 1 in synced  # resumed from a synced checkpoint
