"""One epoch of a Pipe channel written into its FIFO: objects one after another, as they are.

Pieces are written in order, each whole before the next. How the bytes move:

- a ``file://`` object (not compressed) goes from the page cache into the pipe with
  ``splice(2)``: no copy through Python, and no read-ahead needed;
- anything else comes through :class:`ReadAhead` (parallel ranged reads, bounded);
- ``compression: Gzip`` objects are decompressed on the way (zlib, in bounded steps; several
  gzip members one after another are one stream, as ``gzip -d`` reads them);
- with ``record_wrapping: RecordIO`` each piece is one whole RecordIO record (flag 0, framed by
  ``trainops.data``'s encoder), never split into parts, as SageMaker's own writer frames them: a
  spliced object never passes through Python to be scanned for aligned magics, and readers take
  a whole record by its length. A decompressed object's length is only known at its end, so it
  is first spooled (in memory up to a few MiB, then in the agent's scratch directory) and then
  framed.

An object whose bytes do not match its listing (it changed meanwhile), a corrupt gzip object
or a link where an object was listed is a :class:`StorageError` that names the object.
"""

from __future__ import annotations

import os
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from trainops._errors import StorageError
from trainops.agent.channels._fifo import FifoWriter
from trainops.agent.channels._manifest import Piece
from trainops.agent.channels._objects import ReadAhead, Span, spans_of
from trainops.data.formats._recordio import recordio_header, recordio_padding
from trainops.storage import ObjectInfo, ObjectStore, split_uri

__all__ = ["EpochWriter", "StreamOptions"]

_OUT_STEP = 1 << 20  # most decompressed bytes made per zlib call
_SPOOL_IN_MEMORY = 8 << 20
_SPLICE_STEP = 1 << 20


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """How a channel's pieces become bytes in its FIFO."""

    gzip: bool = False
    recordio: bool = False
    chunk: int = 8 << 20  # span size of a ranged read
    budget: int = 64 << 20  # read-ahead bytes held at most
    lanes: int = 16  # ranged reads in flight at most


class EpochWriter:
    """Writes an epoch's pieces into an open FIFO."""

    def __init__(
        self,
        options: StreamOptions,
        store_for: Callable[[str], ObjectStore],
        pool: ThreadPoolExecutor,
        scratch_dir: Path,
        stopping: Callable[[], bool],
    ) -> None:
        self._options = options
        self._store_for = store_for
        self._pool = pool
        self._scratch = scratch_dir
        self._stopping = stopping
        self.peak_ahead = 0  # the most read-ahead bytes held at once, over all epochs

    def write(self, fifo: FifoWriter, pieces: Sequence[Piece]) -> int:
        """Write every piece; returns the bytes written (framing included)."""
        spans = [s for p in pieces if self._via_read_ahead(p) for s in self._spans(p)]
        ahead = ReadAhead(
            spans,
            self._store_for,
            self._pool,
            budget=self._options.budget,
            lanes=self._options.lanes,
            stopping=self._stopping,
        )
        try:
            return sum(self._piece(fifo, piece, ahead) for piece in pieces)
        finally:
            ahead.close()
            self.peak_ahead = max(self.peak_ahead, ahead.peak)

    def _via_read_ahead(self, piece: Piece) -> bool:
        return isinstance(piece, ObjectInfo) and (self._options.gzip or not _is_local(piece))

    def _spans(self, piece: Piece) -> list[Span]:
        assert isinstance(piece, ObjectInfo)
        return spans_of(piece, self._options.chunk)

    def _piece(self, fifo: FifoWriter, piece: Piece, ahead: ReadAhead) -> int:
        if isinstance(piece, bytes):
            return self._framed(fifo, "an attribute", len(piece), lambda: fifo.write(piece))
        uri = piece.uri
        if not self._via_read_ahead(piece):
            return self._framed(fifo, uri, piece.size, lambda: _splice_file(fifo, piece))
        chunks = (ahead.take() for _ in self._spans(piece))
        if not self._options.gzip:
            return self._framed(fifo, uri, piece.size, lambda: _write_all(fifo, chunks))
        plain = _gunzip(uri, chunks)
        if not self._options.recordio:
            return _write_all(fifo, plain)
        with tempfile.SpooledTemporaryFile(_SPOOL_IN_MEMORY, dir=str(self._scratch)) as spool:
            size = _spool(uri, plain, spool)
            spool.seek(0)
            return self._framed(fifo, uri, size, lambda: _write_all(fifo, _read_back(spool)))

    def _framed(self, fifo: FifoWriter, what: str, size: int, body: Callable[[], object]) -> int:
        """``body`` writes ``size`` bytes; with RecordIO they go inside one record."""
        if not self._options.recordio:
            body()
            return size
        header, padding = _record_header(what, size), recordio_padding(size)
        fifo.write(header)
        body()
        fifo.write(padding)
        return len(header) + size + len(padding)


def _is_local(info: ObjectInfo) -> bool:
    return split_uri(info.uri)[0] == "file"


def _write_all(fifo: FifoWriter, chunks: Iterator[bytes]) -> int:
    total = 0
    for chunk in chunks:
        fifo.write(chunk)
        total += len(chunk)
    return total


def _splice_file(fifo: FifoWriter, info: ObjectInfo) -> None:
    """Move the whole listed object into the FIFO, refusing a link or a changed size."""
    path = split_uri(info.uri)[1]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise StorageError(f"{info.uri}: no such object (removed since it was listed)") from None
    except OSError as exc:
        raise StorageError(
            f"{info.uri}: cannot read ({exc.strerror}; links are not followed)"
        ) from None
    try:
        if os.fstat(fd).st_size != info.size:
            raise StorageError(f"{info.uri}: changed size since it was listed ({info.size} bytes)")
        done = 0
        while done < info.size:
            moved = fifo.splice(fd, done, min(_SPLICE_STEP, info.size - done))
            if moved == 0:
                raise StorageError(f"{info.uri}: shrank while it was streamed (at byte {done})")
            done += moved
    finally:
        os.close(fd)


def _gunzip(uri: str, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The decompressed bytes of a gzip object given in ``chunks`` (several members allowed)."""
    decoder: zlib._Decompress | None = zlib.decompressobj(wbits=31)
    seen = 0
    for chunk in chunks:
        data = chunk
        while data:
            if decoder is None:  # between members: NUL padding is allowed, as gzip allows it
                data = data.lstrip(b"\0")
                decoder = zlib.decompressobj(wbits=31) if data else None
                continue
            try:
                out = decoder.decompress(data, _OUT_STEP)
            except zlib.error as exc:
                raise StorageError(
                    f"{uri}: not a valid gzip stream ({exc}; in the bytes after offset {seen})"
                ) from None
            if out:
                yield out
            if decoder.eof:  # the rest is the next member (unconsumed_tail may repeat it)
                data, decoder = decoder.unused_data, None
            else:
                data = decoder.unconsumed_tail
        seen += len(chunk)
    if decoder is not None and seen and not decoder.eof:
        raise StorageError(f"{uri}: truncated gzip stream (ends at byte {seen} mid-member)")


def _record_header(what: str, size: int) -> bytes:
    try:
        return recordio_header(size)
    except ValueError as exc:
        raise StorageError(f"{what}: {exc} (record_wrapping RecordIO wraps it whole)") from None


def _spool(uri: str, chunks: Iterator[bytes], spool: IO[bytes]) -> int:
    """Decompressed bytes into ``spool``; stops as soon as they outgrow one record (a small
    gzip object may expand without bound: it must not fill the scratch disk first)."""
    size = 0
    for chunk in chunks:
        size += len(chunk)
        _record_header(uri, size)
        spool.write(chunk)
    return size


def _read_back(spool: IO[bytes]) -> Iterator[bytes]:
    while chunk := spool.read(_OUT_STEP):
        yield chunk
