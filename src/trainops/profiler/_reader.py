"""Reading a job's profiler data from its prefix, incrementally, while the job runs or after.

:class:`ProfilerReader` lists the prefix on each :meth:`~ProfilerReader.refresh`, reads only the
chunks it has not read yet, and merges them into one :class:`~trainops.profiler._series.Series`
per series: system metrics per host, step timings and dataloader fetches per (host, rank). A
chunk that cannot be read is skipped and named in :attr:`ProfilerReader.errors`; the other
chunks still count. Other files (traces, Python stats) are listed by kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trainops._errors import StorageError
from trainops.profiler._series import CHUNK_SUFFIX, ChunkError, Series, decode_chunk, merge_chunks
from trainops.storage import ObjectStore

__all__ = ["MAX_CHUNK_BYTES", "MAX_META_BYTES", "ProfilerReader", "SeriesKey"]

#: A meta file larger than this is skipped (at most this many bytes and one more are read).
MAX_META_BYTES = 1 << 20
#: A chunk object larger than this is skipped unread (an honest one holds at most 64 MiB of
#: values, zlib-compressed): the reader runs in the control plane, whose memory a job's script
#: must not be able to take by writing a huge file into its profiler folder.
MAX_CHUNK_BYTES = 64 << 20


@dataclass(frozen=True, slots=True, order=True)
class SeriesKey:
    """Which series a chunk belongs to: ``kind`` (system, steps, dataloader), host, rank
    (None for a host-wide series)."""

    kind: str
    host: str
    rank: int | None = None


@dataclass(slots=True)
class ProfilerReader:
    """The profiler data under ``prefix`` (a URI) in ``store``."""

    store: ObjectStore
    prefix: str
    series: dict[SeriesKey, Series] = field(default_factory=dict)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)  # kind -> keys under prefix
    errors: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def refresh(self) -> bool:
        """Read what is new under the prefix; True when anything was."""
        try:
            listed = self.store.list_objects(self.prefix.rstrip("/") + "/")
        except StorageError as exc:
            self.errors.append(f"listing {self.prefix}: {exc}")
            return False
        # A hidden name is a chunk being written (renamed into place when whole): not yet.
        fresh = [
            info
            for info in listed
            if info.key not in self._seen and not info.key.rsplit("/", 1)[-1].startswith(".")
        ]
        fresh.sort(key=lambda info: info.key)
        new_chunks: dict[SeriesKey, list[Any]] = {}
        for info in fresh:
            self._seen.add(info.key)
            bound = _bound(info.key)
            if bound is not None and info.size > bound[0]:
                self.errors.append(
                    f"{info.uri}: {info.size} bytes, more than {bound[1]} may hold "
                    f"({bound[0]} bytes); skipped"
                )
                continue
            self._take(info.key, info.uri, info.size, new_chunks)
        for key, chunks in new_chunks.items():
            self.series[key] = merge_chunks(chunks, self.series.get(key))
        return bool(fresh)

    def _take(self, key: str, uri: str, size: int, new_chunks: dict[SeriesKey, list[Any]]) -> None:
        parts = key.split("/")
        if parts[0] == "meta" and len(parts) == 2 and key.endswith(".json"):
            self._meta(parts[1].removesuffix(".json"), uri, size)
            return
        series_key = _series_key(parts)
        if series_key is None:
            kind = parts[1] if parts[0] == "framework" and len(parts) > 1 else parts[0]
            self.files.setdefault(kind, []).append(key)
            return
        try:
            data = self._read(uri, size)
            new_chunks.setdefault(series_key, []).append(decode_chunk(data, uri))
        except (ChunkError, StorageError, ValueError) as exc:
            self.errors.append(str(exc))

    def _read(self, uri: str, size: int) -> bytes:
        """The object at ``uri``, of ``size`` bytes when it was listed (within its bound): at
        most one byte more is read, whatever it holds now; :class:`ValueError` when it grew."""
        data = self.store.get_range(uri, 0, size + 1)
        if len(data) > size:
            raise ValueError(f"{uri}: grew past its listed {size} bytes while read; skipped")
        return data

    def _meta(self, host: str, uri: str, size: int) -> None:
        try:
            data = self._read(uri, size)
            value = json.loads(data)
            if not isinstance(value, dict):
                raise ValueError("not a JSON object")
        except (StorageError, ValueError, RecursionError) as exc:  # a job wrote it: any bytes
            message = str(exc)
            self.errors.append(message if message.startswith(uri) else f"{uri}: {message}")
            return
        self.meta[host] = value

    def of_kind(self, kind: str) -> dict[SeriesKey, Series]:
        """Every series of ``kind``, by key, in key order."""
        return {k: self.series[k] for k in sorted(self.series) if k.kind == kind}


def _bound(key: str) -> tuple[int, str] | None:
    """The size a file at ``key`` may have, and what it is, for the files that are read."""
    if key.endswith(CHUNK_SUFFIX):
        return MAX_CHUNK_BYTES, "a chunk"
    if key.startswith("meta/") and key.endswith(".json"):
        return MAX_META_BYTES, "a meta file"
    return None


def _series_key(parts: list[str]) -> SeriesKey | None:
    if not parts[-1].endswith(CHUNK_SUFFIX):
        return None
    if parts[0] == "system" and len(parts) == 3:
        return SeriesKey("system", parts[1])
    if parts[0] == "framework" and len(parts) == 5 and parts[3].startswith("rank-"):
        try:
            rank = int(parts[3].removeprefix("rank-"))
        except ValueError:
            return None
        return SeriesKey(parts[1], parts[2], rank)
    return None
