"""A local SRC for ``trainops pack``: listed without following links, read without them either.

The listing keeps regular files only: a symbolic link (to a file or a folder, inside SRC or
out of it), a FIFO, a socket or a device is left out, as is any name starting with ``.``. A
listed file is opened with ``O_NOFOLLOW`` and checked to still be a regular file of the listed
size, so a file swapped for a link after the listing is refused rather than followed.
"""

from __future__ import annotations

import os

from trainops.data._errors import PackError

__all__ = ["read_local", "walk_local"]


class LocalFileError(PackError):
    """A file or folder under SRC cannot be listed or read."""


def walk_local(root: str) -> dict[str, int]:
    """Regular files under ``root`` by ``/``-separated relative path, with their sizes."""
    sizes: dict[str, int] = {}
    folders = [""]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(os.path.join(root, folder)))
        except OSError as error:
            raise LocalFileError(f"cannot list {error.filename}: {error.strerror}") from None
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            key = f"{folder}/{entry.name}" if folder else entry.name
            if entry.is_dir(follow_symlinks=False):
                folders.append(key)
            elif entry.is_file(follow_symlinks=False):
                sizes[key] = entry.stat(follow_symlinks=False).st_size
    return sizes


def read_local(root: str, key: str, size: int) -> bytes:
    """The bytes of the listed file ``key``: all ``size`` of them, and no more.

    ``O_NOFOLLOW`` refuses a link; ``O_NONBLOCK`` keeps a FIFO put in the file's place from
    blocking (it reads as empty, so its size no longer matches); a folder fails to read."""
    path = f"{root}/{key}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise LocalFileError(f"cannot read {path}: {error.strerror}") from None
    try:
        return _read_exactly(fd, path, size)
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
