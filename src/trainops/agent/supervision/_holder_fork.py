"""The host's namespace holder, forked ready before the agent has its launch.

A holder started as ``python -S _hostns_exec.py --hold --run ...`` costs an interpreter's start
and its imports (``ctypes`` among them) on every job's launch path, and the agent waits for it
before the script can start: a short job (a tuning job's trial) pays it once per trial. The
agent forked by the fork server therefore forks a *spare* holder first thing, before it reads its
launch (see ``_standby._become_agent``): the spare is a copy of the fork server, which holds no
job's token or secret, never of the agent. It keeps only its three pipes (its stdin, stdout and
stderr, as a started holder's) and one more on which it waits for its arguments; once they come
it runs ``_hostns_exec``'s own ``main`` with them, exactly as the started holder would, and exits
without running anything of the fork server's (no atexit, no buffered output).
:meth:`HostNamespace.start <trainops.agent.supervision._hostns.HostNamespace.start>` takes the
spare (once) where there is one; an agent without one (started fresh, or a second holder of the
same agent) starts the holder as a program, as before. An agent that never takes it lets it go
(:func:`release_spare_holder`): it reads the end of its arguments and exits.

Only where the holder needs no user namespace (the agent runs as root): a user namespace's
``uid_map`` can only be written by a dumpable process, and the spare, a copy of the fork
server's memory (whose environment carries the server's object-store keys), stays not dumpable,
as the fork server is (``_nodump``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import IO, NoReturn

from trainops import _hostns_exec

__all__ = ["ForkedHolder", "fork_spare_holder", "release_spare_holder", "take_spare_holder"]

_MAX_ARGUMENTS = 1024 * 1024
_spare: ForkedHolder | None = None
_lock = threading.Lock()
_kept: list[object] = []  # the fork server's own stdout/stderr objects, never flushed by us


class ForkedHolder:
    """A forked holder: the part of ``subprocess.Popen`` a ``HostNamespace`` and a
    ``ScriptProcess`` use (``pid``, ``stdin``, ``stdout``, ``stderr``, ``returncode``,
    ``poll``, ``wait``, ``send_signal``, ``kill``); :meth:`begin` hands it its arguments."""

    def __init__(
        self, pid: int, arguments: IO[bytes], stdin: IO[bytes], stdout: IO[bytes], stderr: IO[bytes]
    ) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.stderr: IO[bytes] | None = stderr
        self.returncode: int | None = None
        self._arguments: IO[bytes] | None = arguments

    def begin(self, argv: Sequence[str]) -> None:
        """Send the holder its arguments (those after the program's path), with this process's
        CPUs (the agent pins itself to the host's once the spare is forked: the holder, and the
        script it starts, run on them as a started holder would); raises ``OSError`` if it is
        gone, ``ValueError`` for an argument that holds a NUL byte."""
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.pid, os.sched_getaffinity(0))
        encoded = [os.fsencode(word) for word in argv]
        if any(b"\0" in word for word in encoded):
            raise ValueError("an argument of the host's namespace holder holds a NUL byte")
        stream, self._arguments = self._arguments, None
        if stream is None:
            raise OSError("the holder has already begun")
        with stream:
            stream.write(b"\0".join(encoded))

    def release(self) -> None:
        """Let an unused holder go: its arguments end empty and it exits (reaped here)."""
        stream, self._arguments = self._arguments, None
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
        for pipe in (self.stdin, self.stdout, self.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.stdin = self.stdout = self.stderr = None
        self.wait()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self) -> int:
        """Until it has ended (reaped here): its exit code, or minus the signal that ended it."""
        while self.returncode is None:
            self._reap(0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _reap(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped by another hand: it is gone all the same
            self.returncode = -1
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)


def fork_spare_holder(wanted: bool) -> bool:
    """Fork a spare holder for this process to take, if ``wanted`` (namespaces are made on this
    machine), it runs as root, has a single thread and holds none yet; whether one is held."""
    global _spare
    with _lock:
        usable = wanted and os.getuid() == 0 and threading.active_count() == 1
        if _spare is None and usable:
            with contextlib.suppress(OSError):
                _spare = _fork()
        return _spare is not None


def take_spare_holder() -> ForkedHolder | None:
    """The holder :func:`fork_spare_holder` made (once), or None."""
    global _spare
    with _lock:
        spare, _spare = _spare, None
    return spare


def release_spare_holder() -> None:
    """Let the spare go, if it was never taken (the host made no namespaces of its own)."""
    spare = take_spare_holder()
    if spare is not None:
        spare.release()


def _fork() -> ForkedHolder:
    pipes = [os.pipe() for _ in range(4)]  # arguments, stdin, stdout, stderr
    try:
        pid = os.fork()
    except OSError:
        for pair in pipes:
            for fd in pair:
                os.close(fd)
        raise
    (args_read, args_write), (in_read, in_write), (out_read, out_write), (err_read, err_write) = (
        pipes
    )
    if pid == 0:
        _hold_in_child(args_read, in_read, out_write, err_write)
    for fd in (args_read, in_read, out_write, err_write):
        os.close(fd)
    return ForkedHolder(
        pid,
        os.fdopen(args_write, "wb"),
        os.fdopen(in_write, "wb"),
        os.fdopen(out_read, "rb"),
        os.fdopen(err_read, "rb"),
    )


def _hold_in_child(arguments: int, stdin: int, stdout: int, stderr: int) -> NoReturn:
    """In the forked child: keep only the holder's pipes, wait for the arguments, run the
    holder, and exit without running anything of the parent's."""
    code = 1
    try:
        os.setsid()  # a session of its own, as the started holder's: a stop to the agent's
        # group must not end the namespaces under the script
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)  # the parent's handlers are not ours
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
        moved = os.dup(arguments)
        _close_all_but(moved)
        _kept.extend((sys.stdout, sys.stderr))  # replaced, never flushed into our pipes
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        argv = _read_arguments(moved)
        if argv is not None:
            path = os.environ.get("PATH")
            os.environ.clear()  # as the started holder's: only the search path
            if path is not None:
                os.environ["PATH"] = path
            code = _hostns_exec.main(argv)
        else:
            code = 0
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _read_arguments(fd: int) -> list[str] | None:
    """The NUL-separated arguments read to the end of ``fd``; None when none came."""
    parts, size = [], 0
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 65536):
            size += len(chunk)
            if size > _MAX_ARGUMENTS:
                return None
            parts.append(chunk)
    os.close(fd)
    data = b"".join(parts)
    return [os.fsdecode(word) for word in data.split(b"\0")] if data else None


def _close_all_but(keep: int) -> None:
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
