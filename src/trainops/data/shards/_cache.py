"""The local cache of shards fetched from object storage: bounded, shared by worker processes.

Each shard is one file, under the name its source gives it. A shard is fetched under an exclusive
``flock`` on ``.<name>.lock``, so DataLoader workers that need the same shard wait for one
download instead of making two; it appears under its name only once whole and checked (the
fetcher writes a hidden staging file and renames it). After each fetch the least recently used
shards are deleted until the cache is back under its limit, sparing the shards this process
holds or is about to read. A shard deleted while another process has it mapped stays readable
there (POSIX keeps the file until it is unmapped): the cache on disk can briefly exceed the
limit by the shards being read, never by more.

The cache folder must be a real directory owned by this user (not a link, not someone else's
folder planted in a shared ``/tmp``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from trainops.data._errors import CorruptRecordError

__all__ = ["ShardCache"]


class ShardCache:
    """Shards in ``root``, at most about ``limit`` bytes of them."""

    def __init__(self, root: Path, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"cache_limit must be 1 byte or more, not {limit}")
        self.root = root
        self.limit = limit

    def prepare(self) -> None:
        """Create the folder (mode 0700) and check it is ours, not a link, and closed to
        others (nobody else can put a shard of the right size in it)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = os.lstat(self.root)
        mine = stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid()
        if not mine or status.st_mode & 0o022:
            raise CorruptRecordError(
                str(self.root),
                0,
                "cache folder is a link, belongs to another user or others may write in it; "
                "refused",
            )

    def get(
        self, name: str, size: int, fetch: Callable[[Path], None], keep: Collection[str]
    ) -> Path:
        """The path of shard ``name`` (``size`` bytes), calling ``fetch(staging)`` to make it
        when it is not cached yet; then trim the cache, sparing ``keep``."""
        final = self.root / name
        with self._locked(name):
            if not _cached(final, size):
                staging = self.root / f".{name}.{os.getpid()}.fetch"
                try:
                    fetch(staging)
                    os.replace(staging, final)
                finally:
                    staging.unlink(missing_ok=True)
            else:
                os.utime(final)  # most recently used
        self.trim({name, *keep})
        return final

    def trim(self, keep: Collection[str]) -> None:
        """Delete least recently used shards until the cache fits its limit."""
        entries = sorted(self._entries(), key=lambda entry: entry[0])
        total = sum(size for _, size, _ in entries)
        for _, size, name in entries:
            if total <= self.limit:
                return
            if name not in keep:
                with contextlib.suppress(FileNotFoundError):
                    (self.root / name).unlink()
                total -= size

    def _entries(self) -> Iterator[tuple[float, int, str]]:
        with os.scandir(self.root) as found:
            for entry in found:
                if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    status = entry.stat(follow_symlinks=False)
                    yield status.st_mtime, status.st_size, entry.name

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.root / f".{name}.lock", flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _cached(path: Path, size: int) -> bool:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(status.st_mode) and status.st_size == size
