"""The chaos campaign: 100 faults across one run of a checkpointing spot job, which still completes.

Interruptions with a notice (the script checkpoints in the window), interruptions whose SIGKILL
lands mid-write, SIGKILLs of the host agent and of the whole host (each an internal error that
uses one of the job's retries) and SIGKILLs of the server (started again at once, also in the
middle of an interruption) land at random moments of one job. It must complete, no checkpoint
restored may be corrupt, and its final state must equal an uninterrupted run's, bit for bit
(the script is deterministic: see ``_campaign``).

The agents report every 100 ms (``heartbeat_interval_ms``; 500 by default), as that is how soon
an interruption's stop reaches them: the faults and what each proves are the same, but each of
the sixty interruptions waits some 0.2 s less for its stop to arrive.
"""

from __future__ import annotations

import random
import re
import secrets
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e._campaign import SCRIPT, Faults
from tests.e2e._harness import Server, describe, trainops, wait_for, write_job

pytestmark = pytest.mark.slow

FAULTS = 100
STEPS = 300
RETRIES = 30  # SageMaker's most; the campaign's agent and host kills stay below it
HEARTBEAT_MS = 100
# Its own name in every run: the faults find the job's processes by what marks them (its name),
# so two runs at once on one machine (pytest-xdist, a developer's loop) must not share one.
JOB = f"campaign-{secrets.token_hex(3)}"
FINAL = re.compile(r"final=([0-9a-f]{64})")


def uninterrupted(tmp_path: Path) -> str:
    script, gate = tmp_path / "alone.py", tmp_path / "open-gate"
    script.write_text(SCRIPT)
    gate.touch()
    env = {"SM_CHECKPOINT_DIR": str(tmp_path / "alone-checkpoints"), "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, str(script), "--steps", str(STEPS), "--gate", str(gate)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=True)
    return FINAL.findall(out.stdout)[0]


def test_a_hundred_faults_and_the_job_still_ends_as_if_none_had_come(tmp_path: Path) -> None:
    expected, gate, home = uninterrupted(tmp_path), tmp_path / "gate", tmp_path / "home"
    spec = write_job(
        tmp_path,
        SCRIPT,
        job_name=JOB,
        use_spot_instances=True,
        hyperparameters={"steps": STEPS, "gate": str(gate)},
        checkpoint={"uri": "ckpt/"},
        retry_strategy={"maximum_retry_attempts": RETRIES},
        stopping_condition={"max_runtime_in_seconds": 1800, "max_wait_time_in_seconds": 3600},
    )
    server = Server(home, TRAINOPS_HEARTBEAT_INTERVAL_MS=str(HEARTBEAT_MS)).start()
    faults = Faults(server, JOB, random.Random(23), retries_left=RETRIES - 2)
    try:
        submitted = trainops("submit", str(spec), home=home, **server.env())
        assert submitted.returncode == 0, submitted.stderr
        while len(faults.done) < FAULTS:
            if not faults.inject(faults.pick()) and faults.phase() == "ended":
                job = describe(JOB, home, **server.env())
                pytest.fail(f"ended after {Counter(faults.done)}: {job['FailureReason']}")
        gate.touch()
        job = wait_for(lambda: ended(home, server), timeout=300)
        logs = trainops("logs", JOB, home=home, **server.env()).stdout
    finally:
        faults.close()
        server.stop()
    assert job["TrainingJobStatus"] == "Completed", (Counter(faults.done), job["FailureReason"])
    assert "CORRUPT" not in logs, [line for line in logs.splitlines() if "CORRUPT" in line]
    # A fault that lands after the script's last line but before its host has reported the end
    # (the job still shows Training) restarts the job, which restores the last checkpoint and
    # prints its final line again: every one must be the uninterrupted run's.
    assert FINAL.findall(logs) and set(FINAL.findall(logs)) == {expected}, FINAL.findall(logs)
    resumed = [int(step) for step in re.findall(r"resumed step=(\d+)", logs)]
    assert len([step for step in resumed if step > 0]) >= FAULTS // 4, resumed


def ended(home: Path, server: Server) -> dict[str, object] | None:
    job = describe(JOB, home, **server.env())
    return job if job["TrainingJobStatus"] != "InProgress" else None
