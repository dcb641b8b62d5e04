"""Standby mode: an agent process that has imported everything forks one agent per launch.

Starting Python and importing the agent costs a few hundred milliseconds of CPU, most of a short
job's launch overhead, and when many jobs arrive at once it is paid again for every host. The
local backend therefore keeps one such process (a fork server). Its stdin is a Unix socket: each
launch is one byte carrying (SCM_RIGHTS) the read end of a pipe that holds the launch as JSON
(the variables an agent would otherwise get in its environment, its agent token among them, and
the file its output goes to). The fork server forks a child per launch without reading the pipe:
the child reads it, writes its own pid to stdout (the reply the backend waits for), starts a
session of its own, redirects its output, takes the variables into its environment and runs as
any agent. So the fork server, whose memory every later agent inherits, never holds a job's token
or secrets. The fork server reaps its children and is not dumpable (see ``_nodump``); end of
input (the server went away, or retired it) ends it quietly.

The fork server is single-threaded (importing the agent starts no thread), so forking it is safe.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import socket
from types import FrameType
from typing import Any

from trainops.agent.supervision._holder_fork import fork_spare_holder
from trainops.agent.supervision._hostns import namespaces_available
from trainops.agent.supervision._nodump import forbid_memory_reads
from trainops.protocol import LAUNCH_FD_ENV, STANDBY_ENV

__all__ = ["serve_launches", "take_launch_fd"]

_MAX_LAUNCH = 1024 * 1024


def serve_launches(requests: int = 0, replies: int = 1) -> dict[str, str] | None:
    """Fork one child per launch handed over on ``requests`` (a Unix socket).

    Returns in each child, with the launch applied to it (its environment, its output, its own
    session); returns ``None`` in the fork server at end of input.
    """
    forbid_memory_reads()
    signal.signal(signal.SIGCHLD, _reap_children)
    gc.freeze()  # what the import made stays shared with the children (no copy on write by GC)
    channel = socket.socket(fileno=requests)
    while True:
        launch = _next_launch(channel)
        if launch is None:
            channel.detach()
            return None
        if launch < 0:
            continue
        if os.fork() == 0:
            channel.detach()  # fd 0: replaced by /dev/null once the launch is read
            return _become_agent(launch, replies)
        os.close(launch)


def take_launch_fd() -> None:
    """In a fresh agent handed its launch on a pipe (``TRAINOPS_AGENT_LAUNCH_FD``): read it and
    take its variables into the environment (not into the one /proc shows)."""
    fd = os.environ.pop(LAUNCH_FD_ENV, "")
    if not fd.isdigit():
        return
    message = _read_launch(int(fd))
    if message is not None:
        os.environ.update(message["env"])


def _next_launch(channel: socket.socket) -> int | None:
    """The pipe of the next launch; -1 for a byte that carried none; None at end of input."""
    mark, fds, _flags, _address = socket.recv_fds(channel, 1, 1)
    if not mark:
        for fd in fds:
            os.close(fd)
        return None
    return fds[0] if fds else -1


def _read_launch(fd: int) -> dict[str, Any] | None:
    """The launch in the pipe ``fd`` (closed here); None if it is not one the backend wrote."""
    parts, size = [], 0
    try:
        while chunk := os.read(fd, 64 * 1024):
            size += len(chunk)
            if size > _MAX_LAUNCH:
                return None
            parts.append(chunk)
    finally:
        os.close(fd)
    try:
        message = json.loads(b"".join(parts))
        env = {str(k): str(v) for k, v in message["env"].items()}
        return {"env": env, "output": str(message["output"])}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _become_agent(launch: int, replies: int) -> dict[str, str]:
    """In the child: read the launch, answer with our pid, then become a launched agent."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Before the launch (and its token) is read: the spare is a copy of the fork server's
    # memory, never of an agent's (see _holder_fork).
    fork_spare_holder(namespaces_available())
    message = _read_launch(launch)
    if message is None:
        os._exit(2)  # no agent to run for it (and no pid: the backend falls back)
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
