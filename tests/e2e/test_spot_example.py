"""The digits spot example resumes exactly: interrupted runs end with an uninterrupted run's weights.

The script alone (no trainops): SIGTERM (spot's notice) and SIGKILL at chosen steps, then a run
to the end from the checkpoints left, against one uninterrupted run; the weights' digests must be
equal, bit for bit. The same example under trainops' chaos mode is the second test.

The script-alone test's uninterrupted run goes on beside the interrupted ones (a thread reads
its output): the digests do not depend on what else the machine runs, and the interrupted runs,
whose signals wait for the checkpoint step they name, only get slower for it, which keeps their
interruptions before the end.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.e2e._harness import describe, statuses, trainops, wait_for

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits"
SCRIPT = EXAMPLE / "src" / "train_spot.py"
DIGEST = re.compile(r"model_sha256=([0-9a-f]{64})")
# 23 steps an epoch: enough that two interruptions land before the end however fast the script
# runs past the step the test waits for (on a quiet machine it is some 40 steps on by then).
EPOCHS = "8"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("digits-data")
    subprocess.run(
        [sys.executable, str(EXAMPLE / "prepare_data.py"), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


def start(data: Path, work: Path, epochs: int = int(EPOCHS)) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SM_CHANNEL_TRAIN": str(data / "train"),
        "SM_CHANNEL_TEST": str(data / "test"),
        "SM_MODEL_DIR": str(work / "model"),
        "SM_OUTPUT_DATA_DIR": str(work / "output"),
        "SM_CHECKPOINT_DIR": str(work / "checkpoints"),
    }
    argv = [sys.executable, str(SCRIPT), "--epochs", str(epochs), "--checkpoint-every", "5"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)


def newest_step(work: Path) -> int:
    names = [p.name for p in (work / "checkpoints").glob("checkpoint-step-*.pt")]
    return max((int(n.split("-")[2].split(".")[0]) for n in names), default=0)


def finish(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    return out


@contextlib.contextmanager
def beside(proc: subprocess.Popen[str]) -> Iterator[Future[str]]:
    """``finish(proc)`` in a thread of its own while the block runs; ``proc`` is killed if the
    block ends before it has (a failed test)."""
    pool = ThreadPoolExecutor(1)
    try:
        yield pool.submit(finish, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        pool.shutdown()


def interrupt_after(data: Path, work: Path, step: int, how: signal.Signals) -> str:
    proc = start(data, work)
    wait_for(lambda: newest_step(work) >= step or proc.poll() is not None, timeout=120)
    proc.send_signal(how)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -how, out
    return out


def test_interrupted_runs_end_with_the_uninterrupted_runs_weights(
    data: Path, tmp_path: Path
) -> None:
    work = tmp_path / "interrupted"
    with beside(start(data, tmp_path / "clean")) as clean_run:
        noticed = interrupt_after(data, work, 5, signal.SIGTERM)
        assert "notice: checkpoint at step" in noticed
        interrupt_after(data, work, newest_step(work) + 5, signal.SIGKILL)
        resumed = finish(start(data, work))
        clean = clean_run.result()
    assert "resumed from checkpoint-step-" in resumed
    assert DIGEST.findall(resumed) == DIGEST.findall(clean) != []
    assert (work / "output" / "history.csv").read_bytes() == (
        tmp_path / "clean" / "output" / "history.csv"
    ).read_bytes()


def test_the_spot_example_under_chaos_ends_with_the_uninterrupted_weights(
    data: Path, tmp_path: Path
) -> None:
    """job-spot.yaml as shipped: chaos interrupts it three times, it completes, and its weights
    are an uninterrupted run's (the script alone, same hyperparameters)."""
    work = tmp_path / "digits"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("data", "checkpoints*"))
    shutil.copytree(data, work / "data")
    spec = yaml.safe_load((EXAMPLE / "job-spot.yaml").read_text())
    # The uninterrupted run first, not beside the job: the chaos schedule's interruptions come
    # at set times, and a script slowed by it may meet one before its first checkpoint.
    clean = start(data, tmp_path / "clean", epochs=spec["hyperparameters"]["epochs"])
    expected = DIGEST.findall(finish(clean))
    run = trainops("run", str(work / "job-spot.yaml"), home=tmp_path / "home", timeout=400)
    assert run.returncode == 0, run.stdout + run.stderr
    name = next(line.split()[-1] for line in run.stdout.splitlines() if "Submitted" in line)
    job = describe(name, tmp_path / "home")
    assert statuses(job).count("Interrupted") == 3, statuses(job)
    assert DIGEST.findall(run.stdout) == expected
    assert "resumed from checkpoint-step-" in run.stdout
    assert "Managed Spot Training savings:" in run.stdout
    assert job["BillableTimeInSeconds"] <= job["TrainingTimeInSeconds"]
