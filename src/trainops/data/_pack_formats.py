"""The files of one packed shard, per output format.

Every format writes ``part-NNNNN.<ext>`` (the data file, whose sha256 goes into the index) and
``part-NNNNN.lst`` (im2rec's list: id, labels, path under SRC, one line per record):

- ``recordio``: ``.rec`` records are ``IRHeader(flag, label, id, 0)`` + the file's bytes, as
  im2rec packs them (several labels: ``flag`` of them, as float32 after the header); ``.idx``
  holds ``id<TAB>offset`` lines.
- ``tfrecord``: ``.tfrecord`` records are ``tf.train.Example`` with ``data`` (bytes),
  ``label`` (int64, or float when a ``.lst`` gives fractional labels), ``id`` (int64) and
  ``key`` (the path under SRC); ``.idx`` holds ``offset size`` lines (DALI's ``tfrecord2idx``).
- ``shards``: a trainops shard (``.tops``, see ``_shards``) of IRHeader records as for RecordIO.

Records go out in SRC order; nothing here depends on timing or on the worker that runs it, so
the same input gives byte-identical files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from trainops.data._example import encode_example
from trainops.data._index import ShardInfo
from trainops.data._pack_source import PackError, SourceFile
from trainops.data._recordio import IRHeader, pack_irheader, recordio_frame
from trainops.data._shards import encode_shard
from trainops.data._source_lst import format_lst_line
from trainops.data._tfrecord import tfrecord_frame

__all__ = ["EXTENSIONS", "FORMATS", "shard_files", "write_shard_files"]

FORMATS = ("recordio", "tfrecord", "shards")
EXTENSIONS = {"recordio": "rec", "tfrecord": "tfrecord", "shards": "tops"}
Record = tuple[SourceFile, bytes]
_CHUNK = 4 << 20


def shard_files(fmt: str, number: int) -> tuple[str, ...]:
    """The names of shard ``number``'s files, the data file first."""
    stem = f"part-{number:05d}"
    companions = ("idx", "lst") if fmt in ("recordio", "tfrecord") else ("lst",)
    return (f"{stem}.{EXTENSIONS[fmt]}", *(f"{stem}.{ext}" for ext in companions))


def _irheader_record(file: SourceFile, data: bytes) -> bytes:
    label = file.labels[0] if len(file.labels) == 1 else file.labels
    return pack_irheader(IRHeader(0, label, file.index, 0), data)


def _example_record(file: SourceFile, data: bytes, float_labels: bool) -> bytes:
    labels = list(file.labels) if float_labels else [int(label) for label in file.labels]
    return encode_example(
        {"data": [data], "label": labels, "id": [file.index], "key": [file.key.encode()]}
    )


def _frame(fmt: str, record: Record, float_labels: bool) -> bytes:
    file, data = record
    try:
        if fmt == "tfrecord":
            return tfrecord_frame(_example_record(file, data, float_labels))
        return recordio_frame(_irheader_record(file, data))
    except ValueError as error:  # a RecordIO part over 2**29 - 1 bytes
        raise PackError(f"{file.key}: {error}") from None


def _idx_line(fmt: str, file: SourceFile, offset: int, size: int) -> str:
    return f"{offset} {size}\n" if fmt == "tfrecord" else f"{file.index}\t{offset}\n"


def write_shard_files(
    fmt: str, staging: Path, number: int, records: Iterable[Record], float_labels: bool
) -> ShardInfo:
    """Write shard ``number``'s files into ``staging``; describe its data file."""
    names = shard_files(fmt, number)
    if fmt == "shards":
        return _write_tops(staging, names, list(records))
    digest, offset = hashlib.sha256(), 0
    idx, lst = [], []
    with open(staging / names[0], "wb") as data:
        for chunk in _chunks(_frames(fmt, records, float_labels)):
            for file, size in chunk.files:
                idx.append(_idx_line(fmt, file, offset, size))
                lst.append(format_lst_line(file.index, file.labels, file.key))
                offset += size
            data.write(chunk.data)
            digest.update(chunk.data)
    (staging / names[1]).write_text("".join(idx), encoding="utf-8")
    (staging / names[2]).write_text("".join(lst), encoding="utf-8")
    count = len(idx)
    return ShardInfo(names[0], count, offset, digest.hexdigest())


class _Chunk(NamedTuple):
    """Some records' frames joined (one write, one hash update), and each one's size."""

    data: bytes
    files: list[tuple[SourceFile, int]]


def _frames(
    fmt: str, records: Iterable[Record], float_labels: bool
) -> Iterator[tuple[SourceFile, bytes]]:
    for file, payload in records:
        yield file, _frame(fmt, (file, payload), float_labels)


def _chunks(frames: Iterator[tuple[SourceFile, bytes]]) -> Iterator[_Chunk]:
    """Frames in groups of about ``_CHUNK`` bytes: few large writes rather than many small."""
    batch: list[bytes] = []
    files: list[tuple[SourceFile, int]] = []
    size = 0
    for file, frame in frames:
        batch.append(frame)
        files.append((file, len(frame)))
        size += len(frame)
        if size >= _CHUNK:
            yield _Chunk(b"".join(batch), files)
            batch, files, size = [], [], 0
    if batch:
        yield _Chunk(b"".join(batch), files)


def _write_tops(staging: Path, names: tuple[str, ...], records: list[Record]) -> ShardInfo:
    body = encode_shard([_irheader_record(file, data) for file, data in records])
    with _open(staging, names[0]) as data:
        data.write(body)
    lines = (format_lst_line(f.index, f.labels, f.key) for f, _ in records)
    (staging / names[1]).write_text("".join(lines), encoding="utf-8")
    return ShardInfo(names[0], len(records), len(body), hashlib.sha256(body).hexdigest())


def _open(staging: Path, name: str) -> BinaryIO:
    return open(staging / name, "wb")
