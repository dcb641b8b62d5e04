"""requirements.txt and packages install into a per-job environment layered over the current
interpreter, never into the user's own environment (a hand-built wheel, no network)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.agent._support import make_job
from trainops.protocol import EventKind, HostOutcome

pytestmark = pytest.mark.slow

DIST = "trainops_tiny_dep"


def build_wheel(folder: Path, value: str = "tiny-ok") -> Path:
    """A minimal, valid pure-Python wheel written by hand (METADATA, WHEEL, RECORD)."""
    info = f"{DIST}-0.1.dist-info"
    files = {
        f"{DIST}/__init__.py": f"VALUE = {value!r}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = folder / f"{DIST}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


SCRIPT = f"""
import sys, yaml, trainops, {DIST}
print("value", {DIST}.VALUE)
print("prefix", sys.prefix)
print("parent packages visible", bool(yaml.__file__ and trainops.__file__))
"""


def _user_env_has_dist() -> bool:
    probe = f"import importlib.util; print(importlib.util.find_spec({DIST!r}) is not None)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


def test_requirements_install_into_a_job_environment(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    job = make_job(
        tmp_path,
        {
            "train.py": SCRIPT,
            "requirements.txt": f"--no-index\n./wheels/{wheel.name}\n",
            f"wheels/{wheel.name}": wheel.read_bytes(),
        },
    )
    result = job.run()
    stdout = job.reporter.lines("stdout")
    assert result.outcome is HostOutcome.COMPLETED, (result, job.reporter.lines())
    job_env = job.state_dir / "env"
    assert "value tiny-ok" in stdout
    assert f"prefix {job_env}" in stdout
    assert "parent packages visible True" in stdout
    assert any(
        "Successfully installed trainops-tiny-dep" in line for line in job.reporter.lines("agent")
    )
    [process] = job.reporter.of(EventKind.PROCESS)
    assert process["command"][0] == str(job_env / "bin/python")
    assert not _user_env_has_dist()


def test_a_failing_install_is_an_install_requirements_error(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": "print('never')\n", "requirements.txt": "--no-index\nno-such-dist-xyz==9.9\n"},
    )
    result = job.run()
    assert result.outcome is HostOutcome.FAILED
    assert result.failure_reason is not None
    assert result.failure_reason.startswith('InstallRequirementsError:\nExitCode 1\nErrorMessage "')
    assert "no-such-dist-xyz" in result.failure_reason
    assert job.reporter.of(EventKind.PROCESS) == []


PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "trainops-tiny-pkg"
version = "0.1"

[tool.setuptools]
py-modules = ["train", "helper"]
"""


def test_a_package_is_installed_and_run_as_a_module(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {
            "pyproject.toml": PYPROJECT,
            "helper.py": "GREETING = 'from the package'\n",
            "train.py": "import sys, helper\nprint(helper.GREETING, sys.argv[1:])\n",
        },
        hyperparameters={"lr": 1},
        # Offline: build with the setuptools the layered environment already sees.
        environment={"PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_INDEX": "1"},
    )
    result = job.run()
    assert result.outcome is HostOutcome.COMPLETED, (result, job.reporter.lines())
    [process] = job.reporter.of(EventKind.PROCESS)
    env_python = str(job.state_dir / "env/bin/python")
    assert process["command"] == [env_python, "-m", "train", "--lr", "1"]
    assert job.reporter.lines("stdout") == ["from the package ['--lr', '1']"]
