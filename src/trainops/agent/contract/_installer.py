"""The job's Python: the current interpreter, or a per-job environment layered over it.

Without ``requirements.txt`` or a package the script runs with ``sys.executable`` (the fast path:
nothing to create). Otherwise the agent creates ``<state>/env`` with ``venv
--system-site-packages --without-pip``, adds a ``.pth`` file that appends the current
interpreter's site-packages (``--system-site-packages`` alone would only reach the base
interpreter when the agent itself runs in a virtual environment), and installs into it with the
current interpreter's pip (``pip --python``). The new environment's own packages come first on
``sys.path``; the user's environment is never written to.

A container's command (a job made by the SageMaker API with ``ContainerEntrypoint``) always gets
the per-job environment first on ``PATH`` (:meth:`JobInstaller.layer`): the command may install
packages itself.

A job whose spec names its ``python`` (the SageMaker API sets it from the server's ``images``
setting) runs with that interpreter instead, and its per-job environment is layered over that
interpreter's site-packages the same way.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from trainops._errors import TrainopsError
from trainops.agent.contract._entry_point import EntryPointKind
from trainops.agent.contract._failure import called_process_error, stderr_excerpt

__all__ = [
    "InstallModuleError",
    "InstallRequirementsError",
    "JobFailure",
    "JobInstaller",
    "RunCommand",
]

REQUIREMENTS = "requirements.txt"
LAYER_FILE = "_trainops_layer.pth"
PIP_FLAGS = ("--disable-pip-version-check", "--no-input")

RunCommand = Callable[[Sequence[str]], tuple[int, list[str]]]
"""Runs an argv in the code directory, streaming its output; returns (exit code, stderr tail)."""


class JobFailure(TrainopsError):
    """The job failed for a reason of the user's; ``reason`` is the complete failure reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InstallRequirementsError(JobFailure):
    """``pip install -r requirements.txt`` failed."""


class InstallModuleError(JobFailure):
    """Installing the source directory as a package failed."""


class JobInstaller:
    """Prepares the interpreter that runs the job's script."""

    def __init__(
        self, code_dir: Path, env_dir: Path, run: RunCommand, python: str | None = None
    ) -> None:
        self.code_dir = code_dir
        self.env_dir = env_dir
        self._run = run
        self.python = python or sys.executable

    def needs_environment(self, kind: EntryPointKind) -> bool:
        """As the toolkit: packages always install; Python programs only with requirements."""
        if kind is EntryPointKind.PACKAGE:
            return True
        return kind is EntryPointKind.PYTHON and (self.code_dir / REQUIREMENTS).is_file()

    def prepare(self, kind: EntryPointKind) -> str:
        """The interpreter to run the script with, installing what the source dir asks for."""
        self._check_python()
        if not self.needs_environment(kind):
            return self.python
        python = self.create_environment()
        if (self.code_dir / REQUIREMENTS).is_file():
            self._pip(python, ["-r", REQUIREMENTS], InstallRequirementsError)
        if kind is EntryPointKind.PACKAGE:
            self._pip(python, ["."], InstallModuleError)
        return python

    def layer(self) -> str:
        """The job's own environment over the interpreter (made now, nothing installed), for a
        container's command: what it installs (the SageMaker SDK v3's drivers pip-install the
        source code's requirements with the ``python3`` on ``PATH``) goes there, never into the
        interpreter's own site-packages, which jobs share with the server."""
        self._check_python()
        return self.create_environment()

    def _check_python(self) -> None:
        if self.python == sys.executable:
            return
        if not (os.path.isfile(self.python) and os.access(self.python, os.X_OK)):
            raise JobFailure(
                f"the job's Python {self.python[:300]} is not an executable file on this host "
                "(the server's images setting maps the job's image to it): install it there or "
                "change the mapping"
            )

    def create_environment(self) -> str:
        command = [self.python, "-m", "venv", "--system-site-packages", "--without-pip"]
        done = subprocess.run(
            [*command, str(self.env_dir)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"creating the job environment failed: {done.stderr.strip()}")
        layer = _site_packages(self.env_dir) / LAYER_FILE
        layer.write_text(_layer_lines(self._base_site_dirs()), encoding="utf-8")
        return str(self.env_dir / "bin" / "python")

    def _base_site_dirs(self) -> list[str]:
        """The site-packages directories of the interpreter the environment is layered over."""
        if self.python == sys.executable:
            return list(site.getsitepackages())
        code = "import json, site; print(json.dumps(site.getsitepackages()))"
        done = subprocess.run(
            [self.python, "-c", code], capture_output=True, text=True, check=False, timeout=60
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.python} could not list its site-packages")
        return [str(d) for d in json.loads(done.stdout)]

    def _pip(self, python: str, args: list[str], error: type[JobFailure]) -> None:
        command = [sys.executable, "-m", "pip", "--python", python, "install", *PIP_FLAGS, *args]
        returncode, tail = self._run(command)
        if returncode != 0:
            excerpt = stderr_excerpt(tail)
            raise error(called_process_error(error.__name__, returncode, excerpt, command))


def _site_packages(env_dir: Path) -> Path:
    """The environment's site-packages (its interpreter may be another version than ours)."""
    found = sorted((env_dir / "lib").glob("python*/site-packages"))
    if found:
        return found[0]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return env_dir / "lib" / version / "site-packages"


def _layer_lines(site_dirs: list[str]) -> str:
    """``import`` lines run at start-up: ``addsitedir`` also processes the parent's ``.pth``
    files (editable installs), which a plain path line would not."""
    dirs = [d for d in site_dirs if Path(d).is_dir()]
    return "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)
