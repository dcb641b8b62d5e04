"""`trainops tuning export`: the trials as CSV; on a terminal no value reaches it raw (a
hyperparameter or metric value holds what a job's script chose), in a pipe every value is kept."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.tuner.test_service import tuning_config
from trainops.store import MetadataStore, TuningTrialRecord

HOSTILE = "ad\x1b]0;pwned\x07\x1b[2Jam"


def _home_with_a_hostile_trial(home: Path) -> None:
    config = tuning_config(jobs=1, parallel=1)
    config["hyperparameter_ranges"]["optimizer"] = ["sgd", HOSTILE]
    store = MetadataStore(home / "trainops.db")
    try:
        store.create_tuning_job("tiny", config, "file:///c", 1.0)
        store.add_trial(
            TuningTrialRecord("tiny", 0, "tiny-001-0000", {"lr": 0.01, "optimizer": HOSTILE},
                              "Completed", 2.0, objective=0.5, end_time=3.0)
        )  # fmt: skip
    finally:
        store.close()


def _export(home: Path, stdout: int) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    env["TRAINOPS_HOME"] = str(home)
    argv = [sys.executable, "-m", "trainops.cli", "tuning", "export", "tiny"]
    return subprocess.run(argv, env=env, stdout=stdout, stderr=subprocess.PIPE, timeout=120)


def test_export_escapes_control_characters_on_a_terminal_and_keeps_them_in_a_pipe(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _home_with_a_hostile_trial(home)
    controller, terminal = pty.openpty()
    try:
        done = _export(home, terminal)
        os.close(terminal)
        shown = _read_all(controller)
    finally:
        os.close(controller)
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in shown and b"\x07" not in shown
    assert b"ad\\x1b]0;pwned\\x07\\x1b[2Jam" in shown
    piped = _export(home, subprocess.PIPE)
    assert piped.returncode == 0, piped.stderr
    assert HOSTILE.encode() in piped.stdout  # a file gets the value as it is


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)
