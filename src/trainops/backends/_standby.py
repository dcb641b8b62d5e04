"""The agent fork server: one pre-imported agent process that forks an agent per launch.

Starting Python and importing the agent takes a few hundred milliseconds of CPU on a small
machine, most of a short job's launch overhead; when many jobs arrive at once, paying it for
every host is what limits how many jobs a minute the machine turns over. The local backend keeps
one agent process in standby mode that has done that work once: it forks a child per launch, which
answers with its pid on the reply pipe, starts a session of its own and runs as any agent. The
fork server ends by itself when its stdin closes (the server went away or retired it); the agents
it forked keep running.

The fork server never holds a launch: its stdin is a Unix socket, and each launch is one byte
carrying (SCM_RIGHTS) the read end of a pipe that holds the launch (its variables, the agent
token among them, and its output file) as JSON. The fork server only forks; the child reads the
pipe. So the long-lived fork server, whose memory every later agent inherits, has never seen any
job's token: a job's script that could read it (or a forked sibling) finds none.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainops.protocol import LAUNCH_MARK, STANDBY_ENV

__all__ = ["AgentForkServer", "launch_message", "launch_pipe"]

_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM)
# How long a launch waits for the fork server's answer (it may still be importing, on a loaded
# machine); past it the fork server is killed and the launch falls back to a fresh process.
REPLY_TIMEOUT_S = 60.0
# After that kill, how long to wait for a child forked just before it to give its pid.
_LATE_REPLY_S = 5.0


class AgentForkServer:
    """One pre-started agent process that forks an agent for each launch written to it."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._channel = ours
        self._requests = ours.fileno()
        request_read = theirs.detach()
        self._replies, reply_write = os.pipe()
        try:
            self.pid = os.posix_spawnp(
                command[0],
                list(command),
                {**env, STANDBY_ENV: "1"},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, request_read, 0),
                    (os.POSIX_SPAWN_DUP2, reply_write, 1),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,
                setsigdef=_DEFAULT_SIGNALS,
            )
        except OSError:
            self._close_fds()
            raise
        finally:
            os.close(request_read)
            os.close(reply_write)
        self._lock = threading.Lock()
        self._pending = b""
        self._reaped = False

    def alive(self) -> bool:
        if self._reaped or self._requests < 0:
            return False
        try:
            pid, _status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid != 0:
            self._reaped = True
        return pid == 0

    def launch(
        self, env: Mapping[str, str], output: Path, timeout: float = REPLY_TIMEOUT_S
    ) -> int | None:
        """Have an agent forked for this launch; its pid, or None if none was forked."""
        message = launch_message(env, output)
        with self._lock:
            if not self.alive():
                return None
            try:
                self._send(message)
            except OSError:
                return None
            pid = self._reply(time.monotonic() + timeout)
            if pid is None and self.alive():
                # Stuck: kill it, then take the pid of a child it may have forked just before.
                self._kill()
                pid = self._reply(time.monotonic() + _LATE_REPLY_S)
            return pid

    def retire(self) -> None:
        """End the fork server and reap it; the agents it forked keep running (each in a session
        of its own). It is killed rather than told to exit: one still importing at a server's
        exit would otherwise keep that exit waiting for its start-up."""
        with self._lock:
            if not self._reaped:
                self._kill()
            self._close_fds()

    def _send(self, message: bytes) -> None:
        """Hand the fork server a pipe holding ``message`` (the pipe, never the bytes)."""
        read_end = launch_pipe(message)
        try:
            socket.send_fds(self._channel, [LAUNCH_MARK], [read_end])
        finally:
            os.close(read_end)

    def _reply(self, deadline: float) -> int | None:
        """The next pid line on the reply pipe; None at its end or at ``deadline``."""
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                return None
            chunk = os.read(self._replies, 64)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        try:
            return int(line)
        except ValueError:
            return None

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, 0)
        self._reaped = True
        self._channel.close()
        self._requests = -1

    def _close_fds(self) -> None:
        self._channel.close()
        if self._replies >= 0:
            with contextlib.suppress(OSError):
                os.close(self._replies)
        self._requests = self._replies = -1


def launch_message(env: Mapping[str, str], output: Path) -> bytes:
    """A launch as an agent reads it from its pipe: its variables and its output file."""
    return json.dumps({"env": dict(env), "output": str(output)}).encode()


def launch_pipe(message: bytes) -> int:
    """The read end of a new pipe that holds all of ``message`` (and is closed for writing);
    ``OSError`` if it does not fit in one (the caller then starts the agent another way)."""
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)
        if os.write(write_end, message) != len(message):
            raise OSError("the launch does not fit in a pipe")
    except OSError:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end
