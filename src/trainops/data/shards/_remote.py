"""Shards read straight from object storage (``s3://``), fetched ahead into a bounded cache.

The index is read once, with its size bounded before any of it is kept. Shards are fetched in
the order the dataset will read them, at most ``prefetch`` ahead of the one being read, by a
small thread pool (object-store transfers release the GIL); each is checked against its sha256
from the index before it becomes visible in the cache (:class:`ShardCache`), under a name that
carries that sha256 (a cached copy is only checked by size later). The store and the
pool belong to the process that made them: a DataLoader worker makes its own on first use.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainops.data._errors import CorruptRecordError
from trainops.data.shards._cache import ShardCache
from trainops.data.shards._format import ShardReader
from trainops.data.shards._index import INDEX_NAME, MAX_INDEX_BYTES, ShardInfo
from trainops.data.shards._source import ShardSource, map_shard, parse_shard_index
from trainops.storage import ObjectStore, join_uri

__all__ = ["RemoteShards"]

_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class RemoteShards(ShardSource):
    """The dataset whose ``index.json`` is at ``uri`` + ``/index.json``."""

    def __init__(self, uri: str, *, cache: ShardCache, prefetch: int) -> None:
        if prefetch < 1:
            raise ValueError(f"prefetch must be 1 or more, not {prefetch}")
        self.location = uri.rstrip("/")
        self._cache = cache
        self._prefetch = prefetch
        self._pid = 0
        self._store: ObjectStore | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[int, Future[Path]] = {}
        self._prepared = False
        index_uri = join_uri(self.location, INDEX_NAME)
        text = self._process_store().get_range(index_uri, 0, MAX_INDEX_BYTES + 1)
        self.index = parse_shard_index(text, index_uri)

    def open(self, k: int) -> ShardReader:
        info = self.index.shards[k]
        future = self._pending.pop(k, None)
        path = future.result() if future is not None else self._fetch(k)
        try:
            fd = os.open(path, _OPEN)
        except FileNotFoundError:  # trimmed by another worker since: fetch it again
            fd = os.open(self._fetch(k), _OPEN)
        try:
            return map_shard(fd, self._uri(info), info, verify=False)
        finally:
            os.close(fd)

    def prefetch(self, ks: Sequence[int]) -> None:
        for k in ks:
            if len(self._pending) >= self._prefetch:
                return
            if k not in self._pending:
                self._pending[k] = self._process_pool().submit(self._fetch, k)

    def close(self) -> None:
        if self._pool is not None and self._pid == os.getpid():
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool, self._pending = None, {}

    def __getstate__(self) -> dict[str, Any]:
        blank: dict[str, Any] = {"_pid": 0, "_store": None, "_pool": None, "_pending": {}}
        blank["_prepared"] = False
        return {**self.__dict__, **blank}

    def _uri(self, info: ShardInfo) -> str:
        return join_uri(self.location, info.name)

    def _fetch(self, k: int) -> Path:
        self._ready()
        info = self.index.shards[k]
        # tuple() copies the keys at once: the loop's thread may add to _pending meanwhile.
        keep = {_cache_name(self.index.shards[j]) for j in tuple(self._pending)}
        fetch = functools.partial(self._download, info)
        return self._cache.get(_cache_name(info), info.bytes, fetch, keep)

    def _download(self, info: ShardInfo, dest: Path) -> None:
        uri = self._uri(info)
        self._process_store().download(uri, dest, expected_size=info.bytes)
        digest = hashlib.sha256()
        with open(dest, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        if digest.hexdigest() != info.sha256:
            reason = f"sha256 is {digest.hexdigest()}, {INDEX_NAME} says {info.sha256}"
            raise CorruptRecordError(uri, 0, reason)

    def _process_store(self) -> ObjectStore:
        self._own()
        if self._store is None:
            from trainops._settings import Settings
            from trainops.storage import store_for

            self._store = store_for(self.location, Settings.load())
        return self._store

    def _process_pool(self) -> ThreadPoolExecutor:
        self._own()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._prefetch, thread_name_prefix="shard-fetch")
        return self._pool

    def _ready(self) -> None:
        self._own()
        if not self._prepared:
            self._cache.prepare()
            self._prepared = True

    def _own(self) -> None:
        """Forget what a parent process made (a forked worker inherits it, unusable)."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._store, self._pool, self._pending = None, None, {}
            self._prepared = False


def _cache_name(info: ShardInfo) -> str:
    """A shard's file in the cache: its name and the start of its sha256. A cached file is only
    checked by size when it is used again, so a shard packed again under the same name (or
    another dataset's in a shared ``cache_dir``) must not answer to it."""
    return f"{info.name}.{info.sha256[:16]}"
