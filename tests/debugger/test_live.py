"""A trial on a job that is still writing, and on one killed mid-step: it sees steps as they
arrive, waits for them, stops at the end marker, and never reads a torn step."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from trainops.debugger import NoMoreData, StepState, create_trial, modes

WRITER = """
import sys, numpy as np
from trainops.debugger.format import TensorFileWriter, mark_training_end
out, steps, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
writer = TensorFileWriter(out, "worker_0")
step = 0
while steps < 0 or step < steps:
    value = np.full(size, step, np.float32)
    writer.write_step(step, "TRAIN", step, [("w", value), ("loss", np.float32(step))])
    step += 1
if steps >= 0:
    mark_training_end(out)
"""


def start_writer(out: Path, steps: int, size: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-c", WRITER, str(out), str(steps), str(size)]
    return subprocess.Popen(command, env=env)


def test_a_trial_follows_a_running_job_to_its_end(tmp_path: Path) -> None:
    writer = start_writer(tmp_path, 30, 1000)
    try:
        trial = create_trial(tmp_path, poll_interval=0.05)
        trial.end_delay = 0.05
        trial.wait_for_steps(range(30), modes.TRAIN)
        for step in range(30):
            assert trial.tensor("w").value(step, modes.TRAIN)[0] == step
        with pytest.raises(NoMoreData):
            trial.wait_for_steps([30], modes.TRAIN)
        assert trial.has_passed_step(30, modes.TRAIN) == StepState.UNAVAILABLE
    finally:
        assert writer.wait(timeout=60) == 0


def wait_for_index_files(out: Path, count: int, writer: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while len(list((out / "index").rglob("*.json"))) < count:
        assert writer.poll() is None and time.monotonic() < deadline, "the writer stopped early"
        time.sleep(0.01)


def test_a_job_killed_mid_step_leaves_no_torn_step(tmp_path: Path) -> None:
    writer = start_writer(tmp_path, -1, 2_000_000)  # 8 MB a step: a kill lands mid-write
    try:
        wait_for_index_files(tmp_path, 3, writer)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    trial = create_trial(tmp_path)
    steps = trial.steps(modes.TRAIN)
    assert len(steps) >= 3 and steps == list(range(len(steps)))
    for step in steps:
        value = trial.tensor("w").value(step, modes.TRAIN)
        assert value.shape == (2_000_000,) and np.all(value == step)
    assert trial.errors == []
    assert not trial.loaded_all_steps and trial.has_passed_step(len(steps), modes.TRAIN) == (
        StepState.NOT_YET_AVAILABLE
    )
