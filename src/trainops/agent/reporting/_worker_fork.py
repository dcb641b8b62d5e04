"""The job's first metric worker, forked while the agent still has a single thread.

A metric worker started as ``python -I -S _scrape_worker.py`` costs an interpreter's start
(20-30 ms of CPU on a small machine) on every job's launch path; a short job (a tuning job's
trial) pays it once per trial. The agent instead forks one worker right after it has its
assignment, before any thread of its own exists (forking a process with threads could copy a
lock some other thread holds): the child keeps only its two pipes and the shared progress file,
resets the signals the agent handles, and serves frames exactly as the script does
(``_scrape_worker.serve``). The first :class:`MetricScanner` takes it (:func:`take_spare`); a
worker needed later (one killed for a runaway regex, or an agent with threads already) is
started as a script, as before.

The child holds nothing the script-started worker would not: both are the agent's children,
with its environment, and not dumpable (the flag survives a fork; see ``_nodump``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from typing import IO, NoReturn

from trainops.agent.reporting import _scrape_worker

__all__ = ["ForkedWorker", "fork_spare", "take_spare"]

_spare: ForkedWorker | None = None
_spare_lock = threading.Lock()


class ForkedWorker:
    """A forked metric worker: the part of ``subprocess.Popen`` the scanner uses (``pid``,
    ``stdin``, ``stdout``, ``poll``, ``kill``, ``wait``), and the progress file it shares."""

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes], shared: IO[bytes]) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.shared = shared
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            self._reap(0)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped by another hand: it is gone all the same
            self.returncode = -1
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)


def fork_spare() -> bool:
    """Fork a worker for the first scanner to take, if this process has a single thread and
    holds no spare yet; whether one is held now."""
    global _spare
    with _spare_lock:
        if _spare is None and threading.active_count() == 1:
            with contextlib.suppress(OSError):
                _spare = _fork()
        return _spare is not None


def take_spare() -> ForkedWorker | None:
    """The worker :func:`fork_spare` made (once), or None."""
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    return spare


def _fork() -> ForkedWorker:
    shared = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker)
    shared.truncate(24)
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        _serve_in_child(shared.fileno(), requests_read, replies_write)
    os.close(requests_read)
    os.close(replies_write)
    return ForkedWorker(pid, os.fdopen(requests_write, "wb"), os.fdopen(replies_read, "rb"), shared)


def _serve_in_child(shared: int, requests: int, replies: int) -> NoReturn:
    """In the forked child: keep only what the worker needs, serve, and exit without running
    anything of the agent's (no atexit, no buffered output flushed twice)."""
    code = 1
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)  # the agent's handlers are not ours
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _close_all_but((shared, requests, replies))
        with os.fdopen(requests, "rb") as stdin, os.fdopen(replies, "wb") as stdout:
            code = _scrape_worker.serve(shared, stdin, stdout)
    finally:
        os._exit(code)


def _close_all_but(keep: tuple[int, ...]) -> None:
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
