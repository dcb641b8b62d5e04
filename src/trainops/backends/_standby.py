"""A warm spare host agent: started ahead of time, handed its launch when a job needs a host.

Starting Python and importing the agent takes a few hundred milliseconds on a small machine,
which is most of a short job's launch overhead. The local backend keeps one spare agent process
that has done that work and waits on a pipe; launching a host then costs one write. The spare
runs in a session of its own like any agent, and ends by itself when the pipe closes (the server
went away or retired it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainops.protocol import STANDBY_ENV

__all__ = ["StandbyAgent"]

_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM)


class StandbyAgent:
    """One pre-started agent process waiting for its launch on stdin."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        read_end, self._write_end = os.pipe()
        os.set_inheritable(read_end, False)
        try:
            self.pid = os.posix_spawnp(
                command[0],
                list(command),
                {**env, STANDBY_ENV: "1"},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                    (os.POSIX_SPAWN_CLOSE, self._write_end),
                ],
                setsid=True,
                setsigdef=_DEFAULT_SIGNALS,
            )
        finally:
            os.close(read_end)
        self._used = False

    def alive(self) -> bool:
        if self._used:
            return False
        try:
            pid, _status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return pid == 0

    def hand_over(self, env: Mapping[str, str], output: Path) -> int | None:
        """Give the spare its launch; its pid, or None if it could not take it."""
        if not self.alive():
            return None
        message = json.dumps({"env": dict(env), "output": str(output)}).encode() + b"\n"
        try:
            view = memoryview(message)
            while view:
                view = view[os.write(self._write_end, view) :]
        except OSError:
            return None
        finally:
            self._close_pipe()
        self._used = True
        return self.pid

    def retire(self) -> None:
        """End a spare nobody used, and reap it.

        Closing its pipe would make it exit, but only once it has finished starting; it has no
        job, so it is killed rather than waited for (a server's exit would otherwise wait for
        the spare it started moments before).
        """
        self._close_pipe()
        if not self._used:
            with contextlib.suppress(ChildProcessError, OSError):
                os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still ours
                os.waitpid(self.pid, 0)
            self._used = True

    def _close_pipe(self) -> None:
        if self._write_end >= 0:
            with contextlib.suppress(OSError):
                os.close(self._write_end)
            self._write_end = -1
