"""End to end: TRAINOPS_HOME on a small tmpfs that a job fills up.

The job fails with "no space left on device under ... while ...", the CLI prints one clear line
instead of tracebacks, nothing hangs, and the store stays readable. Mounting a tmpfs needs root
(CAP_SYS_ADMIN); elsewhere these tests skip and say why.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job

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


def test_read_commands_on_a_full_disk_say_so_in_one_line(small_home: Path) -> None:
    assert trainops("jobs", home=small_home).returncode == 0  # creates the store
    with (small_home / "filler.bin").open("wb") as filler, contextlib.suppress(OSError):
        while True:
            filler.write(b"x" * (1 << 20))
            filler.flush()
    result = trainops("jobs", home=small_home)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("trainops: error: the metadata store cannot be used:")
    assert f"the disk under {small_home} is full" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
