"""Standby mode: an agent process that has already imported everything waits for its launch.

The local backend keeps one such spare so that a job's first host does not pay Python's import
time (a large part of a short job's launch overhead). The spare reads one JSON line from stdin:
the launch variables it would otherwise have got in its environment and the file its output goes
to. End of input (the server went away, or retired the spare) ends it quietly.
"""

from __future__ import annotations

import json
import os
import sys
from typing import BinaryIO

from trainops.protocol import STANDBY_ENV

__all__ = ["await_launch"]


def await_launch(stdin: BinaryIO) -> dict[str, str] | None:
    """Block until the launch arrives; apply it to this process. None on end of input."""
    line = stdin.readline()
    if not line.strip():
        return None
    message = json.loads(line)
    env = {str(k): str(v) for k, v in message["env"].items()}
    _redirect_output(message["output"])
    os.environ.pop(STANDBY_ENV, None)
    os.environ.update(env)
    return env


def _redirect_output(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
