"""End to end: a spot job under the chaos mode, with the real control plane and agents, is
interrupted while it checkpoints; its last sync and the restore on the new attempt are recorded
(``checkpoint`` events in the store) and said in the job's log, and the script resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e._harness import describe, statuses, trainops, write_job
from trainops.store import MetadataStore

pytestmark = pytest.mark.slow

# Counts steps, a checkpoint after each (written to a temporary name, renamed into place), and
# one more on SIGTERM, as a spot script does in its notice.
RESUMING = """
import os, signal, sys, time
ck = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
path = os.path.join(ck, "step.txt")
step = int(open(path).read()) if os.path.exists(path) else 0
print("resumed at step", step, flush=True)

def save(n):
    with open(path + ".tmp", "w") as handle:
        handle.write(str(n))
    os.replace(path + ".tmp", path)

def on_term(signum, frame):
    save(step)
    print("saved step", step, "in the notice", flush=True)
    sys.exit(0)

signal.signal(signal.SIGTERM, on_term)
while step < 60:
    step += 1
    save(step)
    time.sleep(0.1)
print("finished at step", step, flush=True)
"""


def test_an_interrupted_spot_job_syncs_restores_and_resumes(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        RESUMING,
        checkpoint={"uri": "ckpt/"},
        use_spot_instances=True,
        stopping_condition={"max_runtime_in_seconds": 300, "max_wait_time_in_seconds": 600},
        chaos={"seed": 7, "interruptions": 1, "mean_seconds_between": 2.0, "notice_seconds": 10},
    )
    home = tmp_path / "home"
    run = trainops("run", str(spec), home=home, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    name = next(line.split()[-1] for line in run.stdout.splitlines() if "Submitted" in line)
    job = describe(name, home)
    assert "Interrupted" in statuses(job), statuses(job)
    assert "finished at step 60" in run.stdout
    resumed = [int(ln.split()[-1]) for ln in run.stdout.splitlines() if "resumed at step" in ln]
    assert resumed[0] == 0 and resumed[-1] > 0  # the new attempt went on from the checkpoint
    store = MetadataStore(home / "trainops.db")
    try:
        records = store.checkpoints(name)
    finally:
        store.close()
    kinds = [(r.attempt, r.kind) for r in records]
    assert (1, "synced") in kinds and (2, "restored") in kinds, kinds
    [restored] = [r for r in records if r.kind == "restored"]
    assert restored.files == 1 and restored.reason is not None
    assert "step.txt" in restored.reason and "by algo-1 (attempt 1)" in restored.reason
    assert any("Interrupted (" in line for line in run.stdout.splitlines()), run.stdout
    assert any("Restored 1 checkpoint file(s)" in line for line in run.stdout.splitlines())
