"""The writing end of one Pipe-mode FIFO: opened when a reader comes, ended on request at once.

Everything here may block on the reader (opening needs one, writing needs room in the pipe) and
everything ends promptly once the channel's :class:`Waker` is set from another thread: the file
descriptor is non-blocking once open and every wait is a ``poll`` that also watches the waker's
pipe. Opening is a blocking ``open()`` (it returns the moment a reader opens, with no polling
delay); :meth:`FifoWriter.release` ends it by opening the FIFO for reading itself.

A reader that closes its end early (or dies) is :class:`ReaderGone`, not an error: SageMaker's
contract lets a reader stop an epoch early and go on with the next one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import stat
import struct
import termios
import threading
from pathlib import Path

from trainops._errors import StorageError

__all__ = ["FifoWriter", "ReaderGone", "Stopped", "Waker", "make_fifo", "pipe_size"]

_MAX_PIPE = 8 << 20  # never ask for more kernel memory per FIFO than this
_DRAIN_WAIT_S = (0.0002, 0.01)  # first and longest sleep while the reader takes the last bytes


class ReaderGone(Exception):
    """The reader closed the FIFO before the writer was done."""


class Stopped(Exception):
    """The writer was told to end."""


def make_fifo(path: Path) -> None:
    """Create the FIFO ``path`` whole: made under a temporary name, renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.fifo")
    os.mkfifo(tmp, 0o600)
    try:
        os.rename(tmp, path)
    except IsADirectoryError:
        raise StorageError(
            f"{path} is a directory (another channel's?); cannot put a FIFO there"
        ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def pipe_size() -> int:
    """The pipe buffer to ask for: the system's maximum for unprivileged users, capped."""
    try:
        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text().strip())
    except (OSError, ValueError):
        limit = 1 << 20
    return max(1 << 16, min(limit, _MAX_PIPE))


class Waker:
    """A stop flag and a pipe that wakes every ``poll`` waiting on it; shared by one channel's
    writers and closed only once none of them is left."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def fileno(self) -> int:
        return self._read

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()
        with contextlib.suppress(OSError):  # full (already woken) or closed: nothing to add
            os.write(self._write, b"x")

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


class FifoWriter:
    """One epoch's FIFO, from the reader's arrival to the writer's close."""

    def __init__(self, path: Path, waker: Waker) -> None:
        self.path = path
        self.pipe_bytes = 0  # the pipe's buffer once open
        self._fd = -1
        self._waker = waker

    def open(self) -> None:
        """Wait for a reader and open the FIFO for writing (:class:`Stopped` if woken first)."""
        self._check()
        fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
        if self._waker.is_set() or not stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.close(fd)
            self._check()
            raise StorageError(f"{self.path} was replaced by something that is not a FIFO")
        self._fd = fd
        os.set_blocking(fd, False)
        self.pipe_bytes = _enlarge(fd)

    def write(self, data: bytes | memoryview) -> None:
        """Write all of ``data``, waiting for room as long as the reader is there."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                self._wait_for_room()
            except BrokenPipeError:
                raise ReaderGone from None

    def splice(self, fd: int, offset: int, count: int) -> int:
        """Move up to ``count`` bytes of the file ``fd`` from ``offset`` into the FIFO without
        copying them through Python; returns how many moved (0 at the file's end)."""
        while True:
            try:
                return os.splice(fd, self._fd, count, offset_src=offset)
            except BlockingIOError:
                self._wait_for_room()
            except BrokenPipeError:
                raise ReaderGone from None

    def drain(self) -> None:
        """Return once the reader has taken every byte written (or :class:`ReaderGone`)."""
        pause = _DRAIN_WAIT_S[0]
        while _unread(self._fd) > 0:
            if self._poll(0, pause) & (select.POLLERR | select.POLLHUP):
                raise ReaderGone
            pause = min(pause * 2, _DRAIN_WAIT_S[1])

    def release(self) -> None:
        """From another thread, once the waker is set: end a wait for a reader in :meth:`open`
        by being a reader for a moment (call it until the writing thread has ended: it may not
        have reached ``open()`` yet)."""
        with contextlib.suppress(OSError):
            os.close(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))

    def close(self) -> None:
        """Close the FIFO: the reader sees EOF once it has read what is left."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1

    def _wait_for_room(self) -> None:
        revents = self._poll(select.POLLOUT, None)
        if revents & select.POLLERR:
            raise ReaderGone

    def _poll(self, events: int, timeout_s: float | None) -> int:
        """Wait for ``events`` on the FIFO; returns what happened to it (0 on a timeout)."""
        self._check()
        poller = select.poll()
        poller.register(self._fd, events)
        poller.register(self._waker.fileno(), select.POLLIN)
        found = dict(poller.poll(None if timeout_s is None else timeout_s * 1000))
        self._check()
        return found.get(self._fd, 0)

    def _check(self) -> None:
        if self._waker.is_set():
            raise Stopped


def _enlarge(fd: int) -> int:
    """Ask for a large pipe buffer; returns the size the kernel gave."""
    try:
        return fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, pipe_size())
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EBUSY, errno.EINVAL):
            raise
        return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


def _unread(fd: int) -> int:
    """Bytes written into the pipe that the reader has not taken yet."""
    raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", raw)[0])
