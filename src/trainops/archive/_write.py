"""Writing checked entries under a target directory without ever following a link.

Every path is walked one component at a time from a descriptor of the target, opening each
directory with ``O_NOFOLLOW`` relative to its parent (``openat``), and every file is created
with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in its parent's descriptor. A symbolic link already on
disk (left by anyone) therefore stops the extraction instead of redirecting it, whatever the
Python version's own ``tarfile`` checks do. Modes lose set-id and sticky bits and group/other
write; the owner can always read and write what was extracted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tarfile
from pathlib import Path
from types import TracebackType
from typing import IO

from trainops._errors import ArchiveError
from trainops.archive._plan import Entry, EntryKind, Parts, shown

__all__ = ["TreeWriter"]

CHUNK = 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class TreeWriter:
    """Creates entries below ``target``; use as a context manager."""

    def __init__(self, target: Path, archive: str) -> None:
        self._archive = archive
        self._root = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._dir_modes: list[tuple[Parts, int]] = []

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is None:
                self._apply_dir_modes()
        finally:
            os.close(self._root)

    def write(self, entry: Entry, tar: tarfile.TarFile) -> None:
        """Create ``entry`` (its parent directories too) from ``tar``."""
        if entry.kind is EntryKind.DIRECTORY:
            os.close(self._directory(entry, entry.parts))
            self._dir_modes.append((entry.parts, entry.member.mode))
            return
        parent = self._directory(entry, entry.parts[:-1])
        try:
            name = entry.parts[-1]
            self._clear(entry, parent, name)
            if entry.kind is EntryKind.SYMLINK:
                os.symlink(entry.member.linkname, name, dir_fd=parent)
            elif entry.kind is EntryKind.HARDLINK:
                with self._open_file(entry, entry.source) as source:
                    self._create(entry, parent, name, source)
            else:
                data = tar.extractfile(entry.member)
                if data is None:
                    raise self._refuse(entry, "has no data")
                with data:
                    self._create(entry, parent, name, data)
        finally:
            os.close(parent)

    def _directory(self, entry: Entry, parts: Parts) -> int:
        """A descriptor of ``parts`` below the target, created as needed, following no link."""
        fd = os.dup(self._root)
        for part in parts:
            try:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST):
                    raise
                raise self._refuse(
                    entry, f"{part!r} on its path is a symbolic link or a file on disk"
                ) from None
            finally:
                os.close(fd)
            fd = child
        return fd

    def _clear(self, entry: Entry, parent: int, name: str) -> None:
        """Remove a file or link of the same name (a later member wins); never a directory."""
        try:
            info = os.lstat(name, dir_fd=parent)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            raise self._refuse(entry, "a directory of that name already exists")
        os.unlink(name, dir_fd=parent)

    def _create(self, entry: Entry, parent: int, name: str, data: IO[bytes]) -> None:
        fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=parent)
        with open(fd, "wb", closefd=True) as out:
            while chunk := data.read(CHUNK):
                out.write(chunk)
            os.fchmod(out.fileno(), _file_mode(entry.member.mode))
            mtime = entry.member.mtime
            with contextlib.suppress(OSError, OverflowError, ValueError):
                os.utime(out.fileno(), (mtime, mtime))

    def _open_file(self, entry: Entry, parts: Parts) -> IO[bytes]:
        parent = self._directory(entry, parts[:-1])
        try:
            return open(os.open(parts[-1], _READ_FLAGS, dir_fd=parent), "rb", closefd=True)
        finally:
            os.close(parent)

    def _apply_dir_modes(self) -> None:
        # Last, as tarfile does: a directory made read-only first could not be filled.
        for parts, mode in self._dir_modes:
            with contextlib.suppress(OSError):
                fd = self._reopen(parts)
                try:
                    os.fchmod(fd, (mode & 0o755) | 0o700)
                finally:
                    os.close(fd)

    def _reopen(self, parts: Parts) -> int:
        fd = os.dup(self._root)
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            finally:
                os.close(fd)
            fd = child
        return fd

    def _refuse(self, entry: Entry, reason: str) -> ArchiveError:
        return ArchiveError(f"{self._archive}: entry {shown(entry.member.name)} rejected: {reason}")


def _file_mode(mode: int) -> int:
    return (mode & 0o755) | 0o600
