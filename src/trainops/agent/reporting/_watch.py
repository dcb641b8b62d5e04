"""Noticing finished files in a directory tree: inotify where the kernel has it, scans elsewhere.

:class:`Inotify` is a small ctypes wrapper (no dependency) that watches a tree recursively for
``IN_CLOSE_WRITE`` (a writer closed a file), ``IN_MOVED_TO`` (a file was renamed into place),
deletions, and new subdirectories (watched as they appear). :func:`open_for_writing` asks the
kernel whether any process still holds a file open for writing, by trying to take a read lease
(Linux ``F_SETLEASE``; refused while a writer has it open); where leases are unavailable it
answers ``None`` and callers fall back to "unchanged across two scans".
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import select
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Event", "Inotify", "inotify_available", "open_for_writing"]

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
_MAX_MOVING = 1024  # renames whose other half has not come (renamed out of the watched tree)
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

_MASK = (
    IN_CLOSE_WRITE
    | IN_MOVED_TO
    | IN_MOVED_FROM
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len

F_SETLEASE = getattr(fcntl, "F_SETLEASE", 1024)
F_RDLCK = getattr(fcntl, "F_RDLCK", 0)
F_UNLCK = getattr(fcntl, "F_UNLCK", 2)


@dataclass(frozen=True, slots=True)
class Event:
    """What happened to ``rel`` (a path relative to the watched root, with ``/``).

    ``kind`` is ``"created"`` (a new file, being written), ``"closed"`` (written and closed, or
    renamed into place), ``"removed"`` (deleted
    or renamed away), or ``"rescan"`` (events were lost or a directory appeared: look again).
    """

    kind: str
    rel: str
    source: str | None = None  # a file renamed into place: the name it was written under
    moved: bool = False  # renamed into place (from this tree or outside it), not closed here


def _libc() -> ctypes.CDLL | None:
    """The C library this process already has loaded (``dlopen(NULL)``): no ``ldconfig`` run, as
    ``ctypes.util.find_library`` would start, in an uploader that may start mid-training."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "inotify_init1") else None


def inotify_available() -> bool:
    return _libc() is not None


class Inotify:
    """A recursive watch on ``root``; :meth:`read` returns the events since the last call."""

    def __init__(self, root: Path) -> None:
        libc = _libc()
        if libc is None:
            raise OSError(errno.ENOSYS, "inotify is not available here")
        self._libc = libc
        self.root = root
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd: int = fd
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory relative to root ("")
        self._moving: dict[int, str] = {}  # a rename's cookie -> the name it moved away from
        self.add_tree("")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def add_tree(self, rel: str) -> list[str]:
        """Watch ``rel`` and every directory under it; returns the files already there."""
        files: list[str] = []
        base = self.root / rel if rel else self.root
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath).relative_to(self.root).as_posix()
            here = "" if here == "." else here
            if not self._add(here):
                dirnames.clear()
                continue
            files.extend(f"{here}/{n}" if here else n for n in filenames)
        return files

    def _add(self, rel: str) -> bool:
        path = str(self.root / rel if rel else self.root).encode()
        wd = self._libc.inotify_add_watch(self.fd, path, _MASK)
        if wd < 0:
            return False  # removed already, or not a directory any more
        self._dirs[wd] = rel
        return True

    def read(self, timeout: float | None) -> list[Event]:
        """Events after waiting up to ``timeout`` seconds for the first one (None: forever)."""
        ready, _w, _x = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        events: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return events
            events.extend(self._parse(data))

    def _parse(self, data: bytes) -> list[Event]:
        out = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, cookie, length = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size : offset + _HEADER.size + length]
            offset += _HEADER.size + length
            name = raw.rstrip(b"\0").decode(errors="surrogateescape")
            out.extend(self._translate(wd, mask, name, cookie))
        return out

    def _translate(self, wd: int, mask: int, name: str, cookie: int = 0) -> list[Event]:
        if mask & IN_Q_OVERFLOW:
            return [Event("rescan", "")]
        if mask & IN_IGNORED:
            self._dirs.pop(wd, None)
            return []
        parent = self._dirs.get(wd)
        if parent is None:
            return []
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
            return [Event("rescan", parent)]
        rel = f"{parent}/{name}" if parent else name
        if mask & IN_ISDIR:
            if mask & (IN_CREATE | IN_MOVED_TO):
                return [Event("closed", f) for f in self.add_tree(rel)] + [Event("rescan", rel)]
            return [Event("rescan", rel)]  # a directory went away: its files are gone
        if mask & IN_MOVED_TO:
            source = self._moving.pop(cookie, None) if cookie else None
            return [Event("closed", rel, source, moved=True)]
        if mask & IN_CLOSE_WRITE:
            return [Event("closed", rel)]
        if mask & IN_CREATE:
            return [Event("created", rel)]
        if mask & IN_MOVED_FROM and cookie:
            if len(self._moving) >= _MAX_MOVING:
                self._moving.clear()  # renamed out of the tree: no MOVED_TO ever pairs them
            self._moving[cookie] = rel
        if mask & (IN_DELETE | IN_MOVED_FROM):
            return [Event("removed", rel)]
        return []


def open_for_writing(path: Path) -> bool | None:
    """True while some process holds ``path`` open for writing; None where we cannot tell.

    The lease is released at once; a writer opening the file in that instant waits for it and
    the kernel sends this process SIGIO, which a long-lived caller must ignore.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, F_SETLEASE, F_RDLCK)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EBUSY):
            return True
        return None  # EINVAL (no leases on this filesystem), EACCES (not our file), ...
    else:
        fcntl.fcntl(fd, F_SETLEASE, F_UNLCK)
        return False
    finally:
        os.close(fd)
