"""End to end: TRAINOPS_HOME on a small tmpfs that a job fills up.

The job fails with "no space left on device under ... while ...", the CLI prints one clear line
instead of tracebacks, nothing hangs, and the store stays readable. A host that ends while the
disk is full is delivered whole once space is freed: every line, its own outcome and end time. Mounting a tmpfs needs root
(CAP_SYS_ADMIN); elsewhere these tests skip and say why.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._harness import Server, describe, trainops, wait_for, write_job

pytestmark = pytest.mark.slow

SIZE = "20m"
BIG_MODEL = """
import os
print("writing the model", flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.bin"), "wb") as f:
    for _ in range(50):
        f.write(os.urandom(1 << 20))
"""
# Fills the disk with a file that is no output of the job (the agent cannot free it).
FILL_THE_DISK = """
import os
with open("filler.bin", "wb") as f:
    try:
        while True:
            f.write(b"x" * (1 << 20))
            f.flush()
    except OSError as exc:
        print("filled:", exc, flush=True)
"""


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(home)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a {SIZE} tmpfs here: {mounted.stderr.strip()}")
    try:
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def test_a_model_larger_than_the_disk_fails_the_job_with_a_clear_reason(
    tmp_path: Path, small_home: Path
) -> None:
    spec = write_job(tmp_path, BIG_MODEL, job_name="bigmodel")
    result = trainops("run", str(spec), home=small_home, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "Job bigmodel: Failed" in result.stdout
    job = describe("bigmodel", small_home)
    assert job["FailureReason"].startswith(f"no space left on device under {small_home} while")
    assert job["Hosts"][0]["Status"] == "Failed"
    # The store is intact and readable by every command.
    listing = trainops("jobs", home=small_home)
    assert listing.returncode == 0 and "bigmodel" in listing.stdout, listing.stderr


def test_a_disk_that_stays_full_ends_the_run_with_one_clear_line(
    tmp_path: Path, small_home: Path
) -> None:
    spec = write_job(tmp_path, FILL_THE_DISK, job_name="filler")
    result = trainops("run", str(spec), home=small_home, timeout=150)
    errors = [line for line in result.stderr.splitlines() if line.startswith("trainops: error:")]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert len(errors) == 1 and "full" in errors[0], result.stderr
    # Once there is space again the store is intact.
    for filler in small_home.rglob("filler.bin"):
        filler.unlink()
    listing = trainops("jobs", home=small_home)
    assert listing.returncode == 0 and "filler" in listing.stdout, listing.stderr


def test_on_a_full_disk_reading_works_and_running_says_which_disk_in_one_line(
    tmp_path: Path, small_home: Path
) -> None:
    assert trainops("jobs", home=small_home).returncode == 0  # creates the store
    with contextlib.suppress(OSError), (small_home / "filler.bin").open("wb", buffering=0) as out:
        while True:
            out.write(b"x" * (1 << 20))
    listing = trainops("jobs", home=small_home)  # reads need no space
    assert listing.returncode == 0 and listing.stderr == "", listing.stderr
    result = trainops("run", str(write_job(tmp_path, "print(1)")), home=small_home)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("trainops: error: "), result.stderr
    assert str(small_home) in result.stderr and "free some space there" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


# Prints LINES lines, then fills the disk (with a file that is no output of the job) and says
# so in a file outside the home, then exits 0: the host ends while the disk is full.
LINES = 20_000
PRINT_THEN_FILL = f"""
import os, time
for i in range({LINES}):
    print(f"line {{i:05d}}")
try:
    with open("filler.bin", "wb") as f:
        while True:
            f.write(b"x" * (1 << 20))
            f.flush()
except OSError as exc:
    print("filled:", exc, flush=True)
with open(os.environ["FILLED_MARKER"], "w") as marker:
    marker.write(repr(time.time()))
"""


def test_a_host_that_ends_on_a_full_disk_is_delivered_whole_once_space_is_freed(
    tmp_path: Path, small_home: Path
) -> None:
    marker = tmp_path / "filled"
    spec = write_job(
        tmp_path,
        PRINT_THEN_FILL,
        job_name="fullend",
        environment={"FILLED_MARKER": str(marker)},
    )
    server = Server(small_home).start()
    try:
        env = server.env()
        submitted = trainops("submit", str(spec), home=small_home, **env)
        assert submitted.returncode == 0, submitted.stderr
        wait_for(marker.exists, timeout=180)
        filled_at = float(marker.read_text())
        # The host has ended, but what it printed last is not in the store: the agent holds it.
        held = describe("fullend", small_home, **env)
        assert held["TrainingJobStatus"] == "InProgress", held
        freed_at = time.time()
        for filler in small_home.rglob("filler.bin"):
            filler.unlink()
        job = wait_for(lambda: _ended(small_home, env), timeout=120)
        logs = trainops("logs", "fullend", home=small_home, **env)
    finally:
        server.stop()
    # The host's own end, not "lost": packing the outputs found no space, and said so.
    assert job["TrainingJobStatus"] == "Failed", job
    assert job["FailureReason"].startswith("no space left on device under"), job
    end = datetime.fromisoformat(job["TrainingEndTime"]).timestamp()
    assert filled_at - 1 <= end < freed_at, (filled_at, end, freed_at)
    printed = [line for line in logs.stdout.splitlines() if line.startswith("[algo-1] line ")]
    assert printed == [f"[algo-1] line {i:05d}" for i in range(LINES)]


def _ended(home: Path, env: dict[str, str]) -> dict[str, Any] | None:
    result = trainops("describe", "fullend", home=home, **env)
    if result.returncode != 0:
        return None
    job: dict[str, Any] = json.loads(result.stdout)
    return job if job["TrainingJobStatus"] in ("Completed", "Failed", "Stopped") else None


def test_submit_on_a_full_disk_says_which_disk_in_one_line(
    tmp_path: Path, small_home: Path
) -> None:
    spec = write_job(tmp_path, "print('hello')", job_name="nospace")
    server = Server(small_home).start()
    try:
        assert trainops("jobs", home=small_home, **server.env()).returncode == 0  # it serves
        with (
            contextlib.suppress(OSError),
            (small_home / "filler.bin").open("wb", buffering=0) as filler,
        ):
            while True:
                filler.write(b"x" * (1 << 20))
        result = trainops("submit", str(spec), home=small_home, **server.env())
    finally:
        server.stop()
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        f"trainops: error: no space left on device under {small_home}"
    ), result.stderr
    assert "free some space there" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
