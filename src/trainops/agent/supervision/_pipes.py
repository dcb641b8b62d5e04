"""One thread that reads a process's stdout and stderr in the order the kernel saw them written.

A pipe keeps no record of when each write came, and two pipes keep none of their order between
them; two reader threads would pass on whichever one the scheduler woke first. The kernel does
say which pipe became readable first: an edge-triggered ``epoll`` set lists its ready pipes in
the order they went from empty to written. So one thread waits on both, and reads them in that
order, each until it is empty, before it waits again. The order kept is therefore:

- a write to one stream made after the reader emptied both pipes comes after everything written
  before it, on either stream (the reader empties the pipes as soon as it wakes);
- between two wake-ups, the stream written first is read first, all of what it then holds
  (so stdout ``A``, stderr ``B``, stdout ``C`` written while the reader is not reading come
  out ``A C B``).

While only one stream is being written, the reader lets the output gather for 2 ms after a read
that found less than a full chunk (where the pipe holds 1 MiB), so a script printing line by line
does not wake it once a line; while both are (each has been read within the last 100 ms), it
does not wait, so that writes of the two streams come apart.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from collections.abc import Callable

__all__ = ["MIXED_SECONDS", "read_pipes"]

MIXED_SECONDS = 0.1
Put = Callable[[str, bytes], None]


def read_pipes(pipes: dict[int, str], put: Put, read_bytes: int, pause: float) -> None:
    """Read every pipe in ``pipes`` (fd: stream name) until its end, passing each chunk to
    ``put(name, chunk)`` in the order described above and ``put(name, b"")`` at its end; the
    pipes are closed when this returns."""
    poller = select.epoll()
    open_pipes = dict(pipes)
    last_data = dict.fromkeys(pipes.values(), float("-inf"))
    try:
        for fd in pipes:
            os.set_blocking(fd, False)
            poller.register(fd, select.EPOLLIN | select.EPOLLET)
        behind: list[int] = []  # pipes left unemptied: read again before waiting
        hung_up: set[int] = set()  # pipes whose writers are gone: read to their end
        while open_pipes:
            events = poller.poll(0 if behind else -1)
            for fd, mask in events:
                if mask & (select.EPOLLHUP | select.EPOLLERR):
                    hung_up.add(fd)
            order = [*behind, *(fd for fd, _ in events if fd not in behind)]
            behind = []
            for fd in order:
                name = open_pipes.get(fd)
                if name is None:
                    continue
                state = _drain(fd, name, put, read_bytes, to_the_end=fd in hung_up)
                if state != "empty":
                    last_data[name] = time.monotonic()
                if state == "end":
                    poller.unregister(fd)
                    del open_pipes[fd]
                    os.close(fd)
                elif state == "more":
                    behind.append(fd)
            if pause and not behind and _one_stream(last_data, open_pipes):
                time.sleep(pause)
    except OSError:
        pass  # a pipe that cannot be read ends the reading; below, every stream gets its end
    finally:
        poller.close()
        for fd, name in open_pipes.items():
            with contextlib.suppress(OSError):
                os.close(fd)
            put(name, b"")


def _drain(fd: int, name: str, put: Put, read_bytes: int, *, to_the_end: bool) -> str:
    """Read ``fd`` until it is empty or a pipe's worth has been read: ``"end"`` (the writers
    are gone), ``"empty"`` (nothing was there), ``"read"`` (emptied) or ``"more"``.

    A short read empties a pipe (any later write is a new edge), except once the writers are
    gone (``to_the_end``): their end is reported once, with the last data, and only a read
    after that data sees it."""
    taken = 0
    while taken < 4 * read_bytes:
        try:
            chunk = os.read(fd, read_bytes)
        except BlockingIOError:
            return "read" if taken else "empty"
        if not chunk:
            put(name, b"")
            return "end"
        put(name, chunk)
        taken += len(chunk)
        if len(chunk) < read_bytes and not to_the_end:
            return "read"
    return "more"


def _one_stream(last_data: dict[str, float], open_pipes: dict[int, str]) -> bool:
    """Whether at most one open stream has had output within :data:`MIXED_SECONDS`."""
    now = time.monotonic()
    recent = [name for name in open_pipes.values() if now - last_data[name] < MIXED_SECONDS]
    return len(recent) <= 1
