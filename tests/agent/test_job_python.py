"""The job's interpreter named by its spec (the SageMaker API's image mapping sets it): the
script runs with it, a per-job environment is layered over its site-packages, and one that is
not there fails the job in one line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from trainops.agent.contract._entry_point import EntryPointKind
from trainops.agent.contract._installer import LAYER_FILE, JobFailure, JobInstaller


def _never(argv: Sequence[str]) -> tuple[int, list[str]]:
    raise AssertionError(f"nothing is installed here, yet {argv} ran")


@pytest.fixture(scope="module")
def other_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter that is not the one running the tests: a bare venv's."""
    venv = tmp_path_factory.mktemp("other") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def test_the_script_runs_with_the_named_python(tmp_path: Path, other_python: Path) -> None:
    installer = JobInstaller(tmp_path / "code", tmp_path / "env", _never, str(other_python))
    assert installer.prepare(EntryPointKind.PYTHON) == str(other_python)
    without = JobInstaller(tmp_path / "code", tmp_path / "env", _never)
    assert without.prepare(EntryPointKind.PYTHON) == sys.executable


def test_the_job_environment_is_layered_over_the_named_python(
    tmp_path: Path, other_python: Path
) -> None:
    installer = JobInstaller(tmp_path / "code", tmp_path / "env", _never, str(other_python))
    python = installer.create_environment()
    layer = next((tmp_path / "env" / "lib").glob(f"python*/site-packages/{LAYER_FILE}"))
    theirs = subprocess.run(
        [str(other_python), "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert repr(theirs) in layer.read_text()
    done = subprocess.run(
        [python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == str(tmp_path / "env")


@pytest.mark.parametrize("name", ["nonexistent/bin/python", "not-executable", "a-directory"])
def test_a_python_that_is_not_there_fails_the_job_in_one_line(tmp_path: Path, name: str) -> None:
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    (tmp_path / "not-executable").chmod(0o644)
    (tmp_path / "a-directory").mkdir()
    missing = str(tmp_path / name)
    installer = JobInstaller(tmp_path / "code", tmp_path / "env", _never, missing)
    with pytest.raises(JobFailure) as caught:
        installer.prepare(EntryPointKind.PYTHON)
    assert f"the job's Python {missing} is not an executable file on this host" in str(caught.value)
    assert "\n" not in str(caught.value)
