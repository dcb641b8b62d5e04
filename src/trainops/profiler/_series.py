"""The profiler's time-series container: append-only chunks of rows, one object each.

A series (one host's system metrics, one rank's step timings, ...) is written as a run of
chunks, each a complete, checksummed object that is never changed once written; a reader lists
the chunks and reads what is there, so data is readable while the job runs. A chunk is:

====================  ===========================================================
``b"TSC1"``           magic
u32 header length     little-endian, then the header: UTF-8 JSON object with at
                      least ``kind`` and ``columns`` (names; the first is ``time``,
                      Unix seconds), and whatever else the writer records (host,
                      rank, attempt, interval, units)
u32 rows              number of rows
u32 body length       then the body: ``rows * len(columns)`` little-endian float64,
                      row after row, zlib-compressed (NaN: no value)
u32 CRC-32            of every byte before it
====================  ===========================================================

A writer (:class:`SeriesWriter`) keeps rows in memory and writes a chunk every
``rotate_seconds`` or ``rotate_rows``, to a temporary name renamed into place, so a directory
sync never sees half a chunk. Columns can change between chunks (a GPU appears); a reader
(:func:`merge_chunks`) aligns them by name.
"""

from __future__ import annotations

import json
import math
import os
import struct
import time
import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CHUNK_SUFFIX",
    "ChunkError",
    "Series",
    "SeriesChunk",
    "SeriesWriter",
    "decode_chunk",
    "encode_chunk",
    "merge_chunks",
]

MAGIC = b"TSC1"
CHUNK_SUFFIX = ".tsc"
_U32 = struct.Struct("<I")
_MAX_HEADER = 1 << 20
#: 64 MiB of float64: a writer rotates at 10,000 rows, so even a host of 800 columns (768
#: cores) stays under it; a larger claim is refused before anything is inflated.
_MAX_CELLS = 1 << 23


class ChunkError(ValueError):
    """Bytes that are not a whole, intact chunk; says what is wrong and at which byte."""


@dataclass(frozen=True, slots=True)
class SeriesChunk:
    """One chunk: its header and its rows (tuples of floats, ``time`` first)."""

    header: Mapping[str, Any]
    rows: list[tuple[float, ...]]

    @property
    def columns(self) -> list[str]:
        return list(self.header["columns"])


def encode_chunk(header: Mapping[str, Any], rows: Sequence[Sequence[float]]) -> bytes:
    """The bytes of one chunk; every row must have one value per column."""
    columns = header.get("columns")
    if not isinstance(columns, list | tuple) or not columns or columns[0] != "time":
        raise ValueError("a chunk's columns must be a list whose first name is 'time'")
    width = len(columns)
    values = array("d")
    for number, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"row {number} has {len(row)} values for {width} columns")
        values.extend(float(v) for v in row)
    if values.itemsize != 8:
        raise RuntimeError("this platform's array('d') is not float64")
    if struct.pack("=I", 1) != struct.pack("<I", 1):
        values.byteswap()
    head = json.dumps(dict(header), separators=(",", ":"), allow_nan=False).encode()
    body = zlib.compress(values.tobytes(), 6)
    out = b"".join(
        [MAGIC, _U32.pack(len(head)), head, _U32.pack(len(rows)), _U32.pack(len(body)), body]
    )
    return out + _U32.pack(zlib.crc32(out))


def decode_chunk(data: bytes, where: str = "chunk") -> SeriesChunk:
    """Read one chunk; a ChunkError names ``where`` and the byte offset of what is wrong."""
    if len(data) < 20 or data[:4] != MAGIC:
        raise ChunkError(f"{where}: not a trainops series chunk (no TSC1 magic at byte 0)")
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    if zlib.crc32(data[:-4]) != crc:
        raise ChunkError(f"{where}: checksum mismatch (CRC-32 at byte {len(data) - 4})")
    (head_len,) = _U32.unpack_from(data, 4)
    if head_len > _MAX_HEADER or 8 + head_len + 8 > len(data) - 4:
        raise ChunkError(f"{where}: header length {head_len} at byte 4 runs past the chunk")
    try:
        header = json.loads(data[8 : 8 + head_len])
    except ValueError as exc:
        raise ChunkError(f"{where}: header at byte 8 is not JSON ({exc})") from None
    columns = header.get("columns") if isinstance(header, dict) else None
    if not isinstance(columns, list) or not columns or columns[0] != "time":
        raise ChunkError(f"{where}: header at byte 8 has no columns starting with 'time'")
    at = 8 + head_len
    rows, body_len = _U32.unpack_from(data, at)[0], _U32.unpack_from(data, at + 4)[0]
    if rows * len(columns) > _MAX_CELLS or at + 8 + body_len != len(data) - 4:
        raise ChunkError(f"{where}: body of {body_len} bytes at byte {at + 8} does not fit")
    raw = _inflate(data[at + 8 : at + 8 + body_len], rows * len(columns) * 8, where, at + 8)
    values = array("d")
    values.frombytes(raw)
    if struct.pack("=I", 1) != struct.pack("<I", 1):
        values.byteswap()
    width = len(columns)
    table = [tuple(values[i : i + width]) for i in range(0, len(values), width)]
    return SeriesChunk(header, table)


def _inflate(body: bytes, expected: int, where: str, offset: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(body, expected + 1)
    except zlib.error as exc:
        raise ChunkError(f"{where}: body at byte {offset} does not inflate ({exc})") from None
    if len(raw) != expected or not inflater.eof:
        raise ChunkError(
            f"{where}: body at byte {offset} holds {len(raw)} bytes of values, not {expected}"
        )
    return raw


@dataclass(slots=True)
class Series:
    """Chunks of one series merged: ``columns`` (the union, in first-seen order) and rows in
    time order, NaN where a chunk lacked a column. ``header`` is the last chunk's."""

    columns: list[str] = field(default_factory=lambda: ["time"])
    rows: list[tuple[float, ...]] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)

    def column(self, name: str) -> list[float]:
        """Every row's value of ``name`` (NaN where missing); [] for an unknown column."""
        if name not in self.columns:
            return []
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    @property
    def times(self) -> list[float]:
        return [row[0] for row in self.rows]

    def __len__(self) -> int:
        return len(self.rows)


def merge_chunks(chunks: Iterable[SeriesChunk], into: Series | None = None) -> Series:
    """Merge ``chunks`` (any order) into one :class:`Series` (or add them to ``into``)."""
    series = into if into is not None else Series()
    added = False
    for chunk in sorted(chunks, key=lambda c: c.rows[0][0] if c.rows else math.inf):
        names = chunk.columns
        for name in names:
            if name not in series.columns:
                series.columns.append(name)
                series.rows = [(*row, math.nan) for row in series.rows]
        where = [names.index(c) if c in names else -1 for c in series.columns]
        for row in chunk.rows:
            series.rows.append(tuple(row[i] if i >= 0 else math.nan for i in where))
        series.header = dict(chunk.header)
        added = True
    if added:
        series.rows.sort(key=lambda row: row[0])
    return series


class SeriesWriter:
    """Appends rows to a series in ``directory``: chunk ``<prefix><seq>.tsc`` every
    ``rotate_seconds`` (by the rows' own clock) or ``rotate_rows`` rows, and at :meth:`close`.

    ``header`` goes into every chunk (``columns`` is set per chunk from :meth:`set_columns`).
    Not thread-safe: one writer per thread.
    """

    def __init__(
        self,
        directory: Path,
        header: Mapping[str, Any],
        columns: Sequence[str],
        *,
        prefix: str = "",
        rotate_seconds: float = 5.0,
        rotate_rows: int = 10_000,
    ) -> None:
        self.directory = directory
        self.header = dict(header)
        self.prefix = prefix
        self.rotate_seconds = rotate_seconds
        self.rotate_rows = rotate_rows
        self.columns = self._checked(columns)
        self.sequence = 0
        self.written: list[Path] = []
        self._rows: list[tuple[float, ...]] = []
        self._opened = time.monotonic()

    @staticmethod
    def _checked(columns: Sequence[str]) -> list[str]:
        names = list(columns)
        if not names or names[0] != "time" or len(set(names)) != len(names):
            raise ValueError("columns must be distinct names, the first being 'time'")
        return names

    def set_columns(self, columns: Sequence[str]) -> None:
        """New columns from the next row on (the rows so far go out as a chunk first)."""
        names = self._checked(columns)
        if names != self.columns:
            self.flush()
            self.columns = names

    def append(self, row: Sequence[float]) -> Path | None:
        """Add a row; returns the chunk's path when this row completed one."""
        if len(row) != len(self.columns):
            raise ValueError(f"{len(row)} values for {len(self.columns)} columns")
        self._rows.append(tuple(float(v) for v in row))
        full = len(self._rows) >= self.rotate_rows
        if full or time.monotonic() - self._opened >= self.rotate_seconds:
            return self.flush()
        return None

    def flush(self) -> Path | None:
        """Write the rows held so far as a chunk (none held: nothing happens)."""
        self._opened = time.monotonic()
        if not self._rows:
            return None
        rows, self._rows = self._rows, []
        data = encode_chunk({**self.header, "columns": self.columns}, rows)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.prefix}{self.sequence:06d}{CHUNK_SUFFIX}"
        self.sequence += 1
        temporary = path.with_name(f".{path.name}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
        self.written.append(path)
        return path

    def close(self) -> Path | None:
        return self.flush()
