"""What to run for an entry point, decided as the training toolkit decides it.

``*.sh`` runs with ``/bin/sh`` (as an argv list, never a shell string); a source directory with
``setup.py`` or ``pyproject.toml`` is a package, installed first and run as ``python -m
<module>``; ``*.py`` runs as ``python <entry point>``; anything else is executed directly.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

__all__ = ["EntryPointKind", "entry_point_command", "entry_point_kind", "module_name"]

PACKAGE_MARKERS = ("setup.py", "pyproject.toml")


class EntryPointKind(StrEnum):
    """The toolkit's entry-point types."""

    SHELL = "shell"
    PACKAGE = "package"
    PYTHON = "python"
    COMMAND = "command"


def entry_point_kind(code_dir: Path, entry_point: str) -> EntryPointKind:
    if entry_point.endswith(".sh"):
        return EntryPointKind.SHELL
    if any((code_dir / marker).is_file() for marker in PACKAGE_MARKERS):
        return EntryPointKind.PACKAGE
    if entry_point.endswith(".py"):
        return EntryPointKind.PYTHON
    return EntryPointKind.COMMAND


def module_name(entry_point: str) -> str:
    """``train.py`` -> ``train``; ``pkg/train.py`` -> ``pkg.train``."""
    stem = entry_point[:-3] if entry_point.endswith(".py") else entry_point
    return stem.replace("/", ".")


def entry_point_command(
    kind: EntryPointKind, code_dir: Path, entry_point: str, python: str, args: Sequence[str]
) -> list[str]:
    """The argv that starts the script (run with ``cwd=code_dir``)."""
    if kind is EntryPointKind.SHELL:
        return ["/bin/sh", str(code_dir / entry_point), *args]
    if kind is EntryPointKind.PACKAGE:
        return [python, "-m", module_name(entry_point), *args]
    if kind is EntryPointKind.PYTHON:
        return [python, entry_point, *args]
    target = code_dir / entry_point
    _make_executable(target)
    return [str(target), *args]


def _make_executable(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return  # starting it fails with a clear "no such file" reason
    # As the toolkit does: the user's program must be executable to run directly.
    os.chmod(path, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)  # noqa: S103
