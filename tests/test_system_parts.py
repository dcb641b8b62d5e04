"""tests/_support/system.py: a missing system part skips a test with the reason here, and fails
it in CI (``CI=true``), where ``make test`` installs every part."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._support import system

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bare_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with nothing on it and an interpreter whose bin/ holds nothing."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    return tmp_path


@pytest.mark.parametrize("name", sorted(system.PARTS))
def test_a_missing_part_skips_with_how_to_install_it(
    name: str, bare_machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not found; install ") as skipped:
        system.require(name)
    assert system.PARTS[name].install in str(skipped.value)


@pytest.mark.parametrize("ci", ["true", "1", "TRUE"])
@pytest.mark.parametrize("name", sorted(system.PARTS))
def test_a_missing_part_fails_in_ci(
    name: str, ci: str, bare_machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="CI=true: make test installs it") as failed:
        system.require(name)
    assert system.PARTS[name].install in str(failed.value)


def test_rclone_needs_fusermount_too(tmp_path: Path, bare_machine: Path) -> None:
    rclone = tmp_path / "empty" / "rclone"
    rclone.write_text("#!/bin/sh\n")
    rclone.chmod(0o755)
    assert system.missing("rclone") == ["fusermount3 or fusermount"]
    (tmp_path / "empty" / "fusermount").symlink_to(rclone)
    assert system.missing("rclone") == []
    assert system.require("rclone") == rclone


def test_a_part_beside_the_interpreter_is_found(tmp_path: Path, bare_machine: Path) -> None:
    weed = tmp_path / "bin" / "weed"
    weed.parent.mkdir()
    weed.write_text("#!/bin/sh\n")
    weed.chmod(0o755)
    assert system.require("weed") == weed


MODULE = """
from tests._support.system import require

def test_needs_the_part():
    require("mpirun")
"""


@pytest.mark.parametrize(("ci", "outcome"), [("", "1 skipped"), ("true", "1 failed")])
def test_a_whole_pytest_run_skips_here_and_fails_in_ci(
    tmp_path: Path, ci: str, outcome: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "test_part.py").write_text(textwrap.dedent(MODULE))
    env = {"PATH": str(tmp_path / "empty"), "PYTHONPATH": str(ROOT), "CI": ci}
    # -I would drop PYTHONPATH; the interpreter is copied nowhere, so mpirun is looked up on
    # the empty PATH and beside the real interpreter, where no venv puts it.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsf", "--rootdir",
         str(tmp_path), str(tmp_path / "test_part.py")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert outcome in done.stdout, done.stdout + done.stderr
    assert "mpirun not found; install Open MPI's mpirun: `make install-mpi`" in done.stdout
    assert done.returncode == (1 if ci else 0), done.stdout


@pytest.mark.parametrize(
    ("ci", "raised"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
@pytest.mark.parametrize("extra", sorted(system.EXTRAS))
def test_a_missing_extra_skips_here_and_fails_in_ci(
    extra: str, ci: str, raised: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", ci)
    monkeypatch.setitem(sys.modules, system.EXTRAS[extra], None)  # as if not installed
    with pytest.raises(raised, match=rf"pip install -e '\.\[{extra}\]' \(make test does\)"):
        system.require_extra(extra)


def test_every_extra_the_tests_need_is_one_make_test_installs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    installed = makefile.split("$(VENV)/.test-installed:")[1].split("-e '.[")[1].split("]'")[0]
    assert set(system.EXTRAS) <= set(installed.split(","))


@pytest.mark.parametrize(
    ("ci", "raised"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
@pytest.mark.parametrize("stamped", [False, True])
def test_an_unbuilt_sdk3_venv_skips_here_and_fails_in_ci(
    tmp_path: Path,
    ci: str,
    raised: type[BaseException],
    stamped: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Absent, or half-built (a Python but no stamp, or the stamp without a Python)."""
    venv = tmp_path / ".venv-sdk3"
    venv.mkdir()
    if stamped:
        (venv / ".installed").touch()
    else:
        (venv / "bin").mkdir()
        (venv / "bin" / "python").touch()
    monkeypatch.setattr(system, "SDK3_VENV", venv)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(raised, match=r"\.venv-sdk3 is not built; build it: make install-sdk3"):
        system.require_sdk3()


def test_a_built_sdk3_venv_gives_its_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / ".venv-sdk3"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".installed").touch()
    monkeypatch.setattr(system, "SDK3_VENV", venv)
    assert system.require_sdk3() == venv / "bin" / "python"


def test_make_test_builds_the_sdk3_venv_from_pinned_requirements() -> None:
    makefile = (ROOT / "Makefile").read_text()
    install_test = next(line for line in makefile.splitlines() if line.startswith("install-test:"))
    assert "$(SDK3_VENV)/.installed" in install_test.split()
    assert "$(SDK3_VENV)/.installed: requirements-sdk3.txt" in makefile
    assert "--no-deps --no-compile -r requirements-sdk3.txt" in makefile
    lines = (ROOT / "requirements-sdk3.txt").read_text().splitlines()
    pins = [line for line in lines if line.strip() and not line.startswith("#")]
    assert all("==" in pin and ";" not in pin for pin in pins), pins
    assert "sagemaker-train==1.27.0" in pins
    assert system.SDK3_VENV == ROOT / ".venv-sdk3"
