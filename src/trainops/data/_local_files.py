"""A local SRC for ``trainops pack``: listed without following links, read without them either.

The listing keeps regular files only: a symbolic link (to a file or a folder, inside SRC or
out of it), a FIFO, a socket or a device is left out, as is any name starting with ``.``. It
reads directories only (the entry types come with the names): the size of every file is not
needed to plan shards, so only a sample is asked for (one name in ``SAMPLE_EVERY``, picked by a
hash of its path, and at least ``MIN_SAMPLE`` of them); the others are listed with size -1.
A listed file is opened with ``O_NOFOLLOW``, checked to be a regular file (``fstat`` on the
open file, so nothing can be swapped in between) and read whole; one whose size was sampled
must still have it. A file swapped for a link after the listing is refused rather than
followed.
"""

from __future__ import annotations

import os
import stat
import zlib

from trainops.data._errors import PackError

__all__ = ["MIN_SAMPLE", "SAMPLE_EVERY", "UNKNOWN_SIZE", "read_local", "walk_local"]

SAMPLE_EVERY = 32
MIN_SAMPLE = 256
UNKNOWN_SIZE = -1


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


def read_local(root: str, key: str, size: int) -> bytes:
    """The bytes of the listed file ``key``: all of them (``size``, where it was sampled).

    ``O_NOFOLLOW`` refuses a link; ``O_NONBLOCK`` keeps a FIFO put in the file's place from
    blocking, and ``fstat`` refuses anything that is not a regular file."""
    path = f"{root}/{key}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise LocalFileError(f"cannot read {path}: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LocalFileError(f"{path}: changed while packing (no longer a regular file)")
        if size != UNKNOWN_SIZE and info.st_size != size:
            raise LocalFileError(f"{path}: changed while packing ({size} bytes listed)")
        return _read_exactly(fd, path, info.st_size)
    except OSError as error:
        raise LocalFileError(f"cannot read {path}: {error.strerror}") from None
    finally:
        os.close(fd)


def _read_exactly(fd: int, path: str, size: int) -> bytes:
    data = os.read(fd, size + 1)
    while len(data) < size:
        more = os.read(fd, size + 1 - len(data))
        if not more:
            break
        data += more
    if len(data) != size:
        raise LocalFileError(f"{path}: changed while packing ({size} bytes listed)")
    return data
