"""The agent fork server: one pre-imported agent process that forks an agent per launch.

Starting Python and importing the agent takes a few hundred milliseconds of CPU on a small
machine, most of a short job's launch overhead; when many jobs arrive at once, paying it for
every host is what limits how many jobs a minute the machine turns over. The local backend keeps
one agent process in standby mode that has done that work once: a launch is one JSON line on its
stdin, and it forks a child that answers with its pid on the reply pipe, starts a session of its
own and runs as any agent. The fork server ends by itself when its stdin closes (the server went
away or retired it); the agents it forked keep running.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainops.protocol import STANDBY_ENV

__all__ = ["AgentForkServer"]

_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM)
# How long a launch waits for the fork server's answer (it may still be importing, on a loaded
# machine); past it the fork server is killed and the launch falls back to a fresh process.
REPLY_TIMEOUT_S = 60.0
# After that kill, how long to wait for a child forked just before it to give its pid.
_LATE_REPLY_S = 5.0


class AgentForkServer:
    """One pre-started agent process that forks an agent for each launch written to it."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        request_read, self._requests = os.pipe()
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
        message = json.dumps({"env": dict(env), "output": str(output)}).encode() + b"\n"
        with self._lock:
            if not self.alive():
                return None
            try:
                view = memoryview(message)
                while view:
                    view = view[os.write(self._requests, view) :]
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
        with contextlib.suppress(OSError):
            os.close(self._requests)
        self._requests = -1

    def _close_fds(self) -> None:
        for fd in (self._requests, self._replies):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._requests = self._replies = -1
