"""Shards in a local directory: a File-mode or FastFile channel, or any folder ``trainops pack``
wrote.

Shards are memory-mapped where they lie (no copy). Names come from ``index.json``, which allows
plain file names only, and every file is opened relative to the directory with ``O_NOFOLLOW``:
a shard (or the index) that is a symbolic link is refused, so nothing outside the directory is
ever read through it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from trainops.data._errors import CorruptRecordError
from trainops.data.shards._format import ShardReader
from trainops.data.shards._index import INDEX_NAME, MAX_INDEX_BYTES, DatasetIndexError
from trainops.data.shards._source import ShardSource, map_shard, parse_shard_index

__all__ = ["LocalShards"]

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class LocalShards(ShardSource):
    """The shards of the dataset in ``root`` (the folder holding ``index.json``)."""

    def __init__(self, root: str | os.PathLike[str], *, verify: bool = False) -> None:
        self.root = Path(root)
        self.location = str(self.root)
        self._verify = verify
        self._dir: int | None = None
        self._pid = 0
        self.index = parse_shard_index(self._read_index(), str(self.root / INDEX_NAME))

    def open(self, k: int) -> ShardReader:
        info = self.index.shards[k]
        path = str(self.root / info.name)
        fd = self._open(info.name, path)
        try:
            return map_shard(fd, path, info, verify=self._verify)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._dir is not None and self._pid == os.getpid():
            os.close(self._dir)
        self._dir = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_dir": None, "_pid": 0}

    def _directory(self) -> int:
        if self._dir is None or self._pid != os.getpid():
            try:
                self._dir = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as error:
                raise DatasetIndexError(f"{self.root}: cannot open: {error.strerror}") from None
            self._pid = os.getpid()
        return self._dir

    def _open(self, name: str, path: str) -> int:
        try:
            return os.open(name, _OPEN, dir_fd=self._directory())
        except OSError as error:
            raise CorruptRecordError(path, 0, f"cannot open: {_why(error)}") from None

    def _read_index(self) -> bytes:
        path = str(self.root / INDEX_NAME)
        try:
            fd = os.open(INDEX_NAME, _OPEN, dir_fd=self._directory())
        except FileNotFoundError:
            raise DatasetIndexError(
                f"{path}: no such file; a folder of trainops shards has one "
                "(made by trainops pack SRC DEST --format shards)"
            ) from None
        except OSError as error:
            raise DatasetIndexError(f"{path}: cannot open: {_why(error)}") from None
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise DatasetIndexError(f"{path}: not a regular file")
            return handle.read(MAX_INDEX_BYTES + 1)


def _why(error: OSError) -> str:
    return "a symbolic link, refused" if error.errno == errno.ELOOP else str(error.strerror)
