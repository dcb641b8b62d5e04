"""End to end with the real agent: a spot job interrupted by its chaos schedule resumes from its
synced checkpoint, and `trainops run` ends with the SDK's spot lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._harness import Server, describe, trainops, wait_for, write_job
from trainops.agent.supervision._hostns import opt_ml_shown

pytestmark = pytest.mark.slow

# Counts to STEPS, a checkpoint per step (written whole: temp file, then rename), resuming from
# the newest one it finds; on SIGTERM (the interruption's notice) it writes one last checkpoint.
# A step takes PAUSE seconds, or PAUSE_RESUMED once it has resumed from a checkpoint.
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
pause = float(os.environ.get("PAUSE", "0.25"))
pause = float(os.environ.get("PAUSE_RESUMED", pause)) if done else pause
while step < int(os.environ.get("STEPS", "12")):
    save(step)
    step += 1
    time.sleep(pause)
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
    if opt_ml_shown(True):  # the job runs with the real /opt/ml: its checkpoints are there
        assert out.count("from /opt/ml/checkpoints") == 2, out
    assert "Interruptions: 1" in out and "Managed Spot Training savings: " in out
    name = next(line.split()[-1] for line in out.splitlines() if "Submitted" in line)
    job = describe(name, home)
    statuses = [t["Status"] for t in job["SecondaryStatusTransitions"]]
    assert statuses[statuses.index("Interrupted") + 1] == "Starting", statuses
    assert (job["Interruptions"], job["Attempt"]) == (1, 2)
    assert job["BillableTimeInSeconds"] <= job["TrainingTimeInSeconds"]
    synced = [int(p.name.split("-")[1]) for p in (tmp_path / "ckpt").glob("step-*")]
    assert max(synced) == 11 and resumed[1] - 1 in synced  # resumed from a synced checkpoint


def test_a_server_killed_while_interrupted_and_while_waiting_changes_nothing(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    spec = write_job(
        tmp_path,
        COUNTING,
        job_name="enduring",
        checkpoint={"uri": "ckpt/"},
        use_spot_instances=True,
        stopping_condition={"max_runtime_in_seconds": 120, "max_wait_time_in_seconds": 300},
        # The first attempt's slow steps keep it running through the interruption and the
        # server's restart; once resumed, nothing needs it to be slow (the last kill lands as
        # the new attempt starts, or after its end, which the next server reads from its journal).
        environment={"STEPS": "30", "PAUSE": "0.5", "PAUSE_RESUMED": "0.1"},
    )
    server = Server(home).start()

    def now() -> dict[str, Any]:
        return describe("enduring", home, **server.env())

    try:
        assert trainops("submit", str(spec), home=home, **server.env()).returncode == 0
        wait_for(lambda: (tmp_path / "ckpt" / "step-3").exists(), timeout=120)
        interrupt = ["chaos", "interrupt", "enduring", "--gap", "6", "--notice", "3"]
        said = trainops(*interrupt, home=home, **server.env())
        assert said.returncode == 0, said.stderr
        server.kill()  # SIGKILL while Interrupted: the agents hear it from the next one
        server.start()
        wait_for(lambda: now()["SecondaryStatus"] == "Pending", timeout=60)
        server.kill()  # SIGKILL mid-gap: the wait resumes where it was
        server.start()
        wait_for(lambda: now()["Attempt"] == 2, timeout=60)
        server.kill()  # SIGKILL as the new attempt starts
        server.start()
        job = wait_for(lambda: (d := now())["TrainingJobStatus"] != "InProgress" and d, timeout=120)
        logs = trainops("logs", "enduring", home=home, **server.env()).stdout
    finally:
        server.stop()
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    statuses = [t["Status"] for t in job["SecondaryStatusTransitions"]]
    assert statuses.count("Interrupted") == statuses.count("Pending") == 1, statuses
    assert (job["Attempt"], job["Interruptions"]) == (2, 1)
    resumed = [int(n) for n in re.findall(r"resumed at (\d+)", logs)]
    assert resumed[0] == 0 and len(resumed) == 2 and resumed[1] >= 4, logs
