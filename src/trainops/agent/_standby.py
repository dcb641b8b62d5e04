"""Standby mode: an agent process that has imported everything forks one agent per launch.

Starting Python and importing the agent costs a few hundred milliseconds of CPU, most of a short
job's launch overhead, and when many jobs arrive at once it is paid again for every host. The
local backend therefore keeps one such process (a fork server): it reads launches from stdin,
one JSON line each (the launch variables an agent would otherwise get in its environment and the
file its output goes to), and forks a child per launch. The child writes its own pid to stdout
(the reply the backend waits for), starts a session of its own, redirects its output, takes the
variables into its environment and runs as any agent. The fork server reaps its children; end
of input (the server went away, or retired it) ends it quietly.

The fork server is single-threaded (importing the agent starts no thread), so forking it is safe.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
from types import FrameType
from typing import Any

from trainops.protocol import STANDBY_ENV

__all__ = ["serve_launches"]

_READ_BYTES = 64 * 1024


def serve_launches(requests: int = 0, replies: int = 1) -> dict[str, str] | None:
    """Fork one child per launch read from ``requests``.

    Returns in each child, with the launch applied to it (its environment, its output, its own
    session); returns ``None`` in the fork server at end of input.
    """
    signal.signal(signal.SIGCHLD, _reap_children)
    gc.freeze()  # what the import made stays shared with the children (no copy on write by GC)
    pending = b""
    while True:
        line, pending = _next_line(requests, pending)
        if line is None:
            return None
        message = _parse(line)
        if message is None:
            continue
        if os.fork() == 0:
            return _become_agent(message, replies)


def _next_line(fd: int, pending: bytes) -> tuple[bytes | None, bytes]:
    """One line from ``fd`` (read unbuffered, so a child never inherits unread launches)."""
    while b"\n" not in pending:
        chunk = os.read(fd, _READ_BYTES)
        if not chunk:
            return None, b""
        pending += chunk
    line, _, rest = pending.partition(b"\n")
    return line, rest


def _parse(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        message = json.loads(line)
        env = {str(k): str(v) for k, v in message["env"].items()}
        return {"env": env, "output": str(message["output"])}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # not a launch the backend wrote: no agent to fork for it


def _become_agent(message: dict[str, Any], replies: int) -> dict[str, str]:
    """In the child: answer with our pid, then become a launched agent."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    pid = f"{os.getpid()}\n".encode()
    with contextlib.suppress(OSError):  # the backend gave up waiting; run anyway, as launched
        os.write(replies, pid)
    _redirect_output(message["output"])
    env: dict[str, str] = message["env"]
    os.environ.pop(STANDBY_ENV, None)
    os.environ.update(env)
    return env


def _reap_children(_signum: int, _frame: FrameType | None) -> None:
    """SIGCHLD in the fork server: collect every child that has exited."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _redirect_output(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
