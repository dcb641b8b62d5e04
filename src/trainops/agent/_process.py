"""The script's process: started in its own session, its output read line by line, stopped by
process group (SIGTERM, then SIGKILL once the grace period has passed), and always reaped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from trainops.agent._hostlog import LineSink

__all__ = ["LINE_CAP", "ScriptProcess"]

LINE_CAP = 64 * 1024
TAIL_LINES = 200
READER_JOIN_SECONDS = 5.0
FINISH_POLL_SECONDS = 0.1


class ScriptProcess:
    """One running command and the threads that read its stdout and stderr."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        on_line: LineSink,
    ) -> None:
        self.argv = list(argv)
        self._cwd = cwd
        self._env = dict(env)
        self._on_line = on_line
        self._proc: subprocess.Popen[bytes] | None = None
        self._readers: list[threading.Thread] = []
        self._kill_at: float | None = None
        self._exited = threading.Event()
        self.stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def pgid(self) -> int:
        # start_new_session makes the child the leader of its own process group.
        return self._popen.pid

    @property
    def stopping(self) -> bool:
        return self._kill_at is not None

    def start(self) -> None:
        """Start the command; raises ``OSError`` when it cannot be executed."""
        self._proc = subprocess.Popen(
            self.argv,
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for name, stream in (("stdout", self._proc.stdout), ("stderr", self._proc.stderr)):
            assert stream is not None
            reader = threading.Thread(
                target=self._read, args=(name, stream), name=f"agent-{name}", daemon=True
            )
            reader.start()
            self._readers.append(reader)
        threading.Thread(target=self._watch, name="agent-waitid", daemon=True).start()

    def wait(self, timeout: float) -> int | None:
        """The exit code once the process has ended, else ``None`` after ``timeout`` seconds.

        Also delivers the SIGKILL of a stop whose grace period has run out.
        """
        if self._exited.wait(timeout):
            return self._reap()
        if self._kill_at is not None and time.monotonic() >= self._kill_at:
            self.signal_group(signal.SIGKILL)
        return None

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM the whole group now; :meth:`wait` sends SIGKILL after ``grace_seconds``."""
        deadline = time.monotonic() + max(0.0, grace_seconds)
        if self._kill_at is None:
            self.signal_group(signal.SIGTERM)
            self._kill_at = deadline
        else:
            self._kill_at = min(self._kill_at, deadline)

    def finish(self) -> int:
        """Wait for the end (still delivering a pending SIGKILL), reap, and drain the output."""
        while (returncode := self.wait(FINISH_POLL_SECONDS)) is None:
            pass
        for reader in self._readers:
            # A process that left the group (setsid) may hold the pipe open forever.
            reader.join(timeout=READER_JOIN_SECONDS)
        return returncode

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
            os.killpg(self.pgid, sig)

    @property
    def _popen(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("the process has not been started")
        return self._proc

    def _watch(self) -> None:
        """Learn of the exit without reaping, so the group id cannot be reused before
        :meth:`_reap` has killed what the script left behind."""
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        self._exited.set()

    def _reap(self) -> int:
        if self._popen.returncode is None:
            self.signal_group(signal.SIGKILL)
        return self._popen.wait()

    def _read(self, name: str, stream: IO[bytes]) -> None:
        with stream:
            while chunk := stream.readline(LINE_CAP):
                line = _decode_line(chunk)
                if name == "stderr":
                    self.stderr_tail.append(line)
                self._on_line(name, line, time.time())


def _decode_line(chunk: bytes) -> str:
    if chunk.endswith(b"\n"):
        chunk = chunk[:-1]
    if chunk.endswith(b"\r"):
        chunk = chunk[:-1]
    return chunk.decode("utf-8", errors="replace")
