"""Writing profiler files whole: a hidden temporary name in the same directory, then a rename.

A directory mirror (the profiler sidecar) skips names that start with a dot, so it never uploads
half a file; the rename makes the finished file appear at once under its final name.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

__all__ = ["hidden_temporary", "say", "write_atomic"]

_SAID: set[str] = set()


def hidden_temporary(path: Path) -> Path:
    """A temporary name beside ``path`` that mirrors skip (``.<name>.<pid>.tmp``)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a hidden temporary name; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = hidden_temporary(path)
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def say(line: str, *, once: str | None = None) -> None:
    """One line on stderr, prefixed ``trainops.profiler:``; with ``once``, only the first time."""
    if once is not None:
        if once in _SAID:
            return
        _SAID.add(once)
    # A closed or broken stderr (a daemonized script) must not break the script.
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"trainops.profiler: {line}\n")
        sys.stderr.flush()
