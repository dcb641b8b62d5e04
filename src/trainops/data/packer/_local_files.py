"""A local SRC for ``trainops pack``: listed without following links, read without them either.

The listing keeps regular files only: a symbolic link (to a file or a folder, inside SRC or
out of it), a FIFO, a socket or a device is left out, as is any name starting with ``.``. It
reads directories only (the entry types come with the names): the size of every file is not
needed to plan shards, so only a sample is asked for (one name in ``SAMPLE_EVERY``, picked by a
hash of its path, and at least ``MIN_SAMPLE`` of them); the others are listed with size -1.
A listed file is opened with ``O_NOFOLLOW`` relative to its folder (itself opened component
by component with ``O_NOFOLLOW``), checked to be a regular file (``fstat`` on the open file,
so nothing can be swapped in between) and read whole; one whose size was sampled must still
have it. A file or folder swapped for a link after the listing is refused rather than
followed.
"""

from __future__ import annotations

import os
import stat
import zlib

from trainops.data._errors import PackError

__all__ = ["MIN_SAMPLE", "SAMPLE_EVERY", "UNKNOWN_SIZE", "LocalReader", "walk_local"]

SAMPLE_EVERY = 32
MIN_SAMPLE = 256
UNKNOWN_SIZE = -1
_OPEN_FOLDERS = 128  # folder descriptors a reader keeps open, at most (a shuffled .lst)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class LocalFileError(PackError):
    """A file or folder under SRC cannot be listed or read."""


def walk_local(root: str) -> dict[str, int]:
    """Regular files under ``root`` by ``/``-separated relative path, with their sizes where
    sampled (see the module docstring), else ``UNKNOWN_SIZE``."""
    sizes: dict[str, int] = {}
    folders = [""]
    while folders:
        folder = folders.pop()
        prefix = f"{folder}/" if folder else ""
        files = []
        for entry in _entries(os.path.join(root, folder)):
            if entry.name[0] == ".":
                continue
            if entry.is_file(follow_symlinks=False):  # False for a link, as is is_dir
                files.append(entry)
            elif entry.is_dir(follow_symlinks=False):
                folders.append(prefix + entry.name)
        for entry in files:
            key = prefix + entry.name
            sampled = zlib.crc32(key.encode("utf-8", "surrogateescape")) % SAMPLE_EVERY == 0
            sizes[key] = entry.stat(follow_symlinks=False).st_size if sampled else UNKNOWN_SIZE
    _sample_more(root, sizes)
    return sizes


def _entries(path: str) -> list[os.DirEntry[str]]:
    """The entries of one folder (their types come with them: no stat per entry)."""
    try:
        with os.scandir(path) as entries:
            return list(entries)
    except OSError as error:
        raise LocalFileError(f"cannot list {error.filename}: {error.strerror}") from None


def _sample_more(root: str, sizes: dict[str, int]) -> None:
    """Ask for sizes in path order until ``MIN_SAMPLE`` are known (or all of them)."""
    known = len(sizes) - list(sizes.values()).count(UNKNOWN_SIZE)
    if known >= MIN_SAMPLE:
        return
    for key in sorted(sizes):
        if known >= MIN_SAMPLE:
            return
        if sizes[key] == UNKNOWN_SIZE:
            try:
                sizes[key] = os.stat(f"{root}/{key}", follow_symlinks=False).st_size
            except OSError as error:
                raise LocalFileError(f"cannot list {error.filename}: {error.strerror}") from None
            known += 1


class LocalReader:
    """Reads listed files under ``root``, each opened relative to its folder: the folders are
    opened once (a few at a time), one component at a time with ``O_NOFOLLOW``, so a folder
    swapped for a link is refused too, and the kernel resolves one name per file, not the
    whole path. ``O_NONBLOCK`` keeps a FIFO put in a file's place from blocking, and
    ``fstat`` refuses anything that is not a regular file."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._folders: dict[str, int] = {}

    def __enter__(self) -> LocalReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        folders, self._folders = self._folders, {}
        for fd in folders.values():
            os.close(fd)

    def read(self, key: str, size: int) -> bytes:
        """The bytes of the listed file ``key``: all of them (``size``, where it was sampled)."""
        folder, _, name = key.rpartition("/")
        try:
            folder_fd = self._folders.get(folder)
            if folder_fd is None:
                folder_fd = self._open_folder(folder)
            fd = os.open(name, _FILE_FLAGS, dir_fd=folder_fd)
        except OSError as error:
            raise LocalFileError(f"cannot read {self.root}/{key}: {error.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise LocalFileError(
                    f"{self.root}/{key}: changed while packing (no longer a regular file)"
                )
            if size != UNKNOWN_SIZE and info.st_size != size:
                raise LocalFileError(
                    f"{self.root}/{key}: changed while packing ({size} bytes listed)"
                )
            data = os.read(fd, info.st_size + 1)
            if len(data) != info.st_size:
                data = _read_rest(fd, f"{self.root}/{key}", info.st_size, data)
            return data
        except OSError as error:
            raise LocalFileError(f"cannot read {self.root}/{key}: {error.strerror}") from None
        finally:
            os.close(fd)

    def _open_folder(self, folder: str) -> int:
        if len(self._folders) >= _OPEN_FOLDERS:
            os.close(self._folders.pop(next(iter(self._folders))))  # the oldest
        fd = os.open(self.root, _FOLDER_FLAGS)
        for part in folder.split("/") if folder else ():
            try:
                inner = os.open(part, _FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            finally:
                os.close(fd)
            fd = inner
        self._folders[folder] = fd
        return fd


def _read_rest(fd: int, path: str, size: int, data: bytes) -> bytes:
    """Read on after a short first read; the file must end at ``size`` bytes."""
    while len(data) < size:
        more = os.read(fd, size + 1 - len(data))
        if not more:
            break
        data += more
    if len(data) != size:
        raise LocalFileError(f"{path}: changed while packing ({size} bytes listed)")
    return data
