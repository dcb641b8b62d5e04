"""The output formats of ``trainops pack``: one :class:`PackFormat` per ``--format`` value.

Every format writes ``part-NNNNN.<extension>`` (the data file, whose sha256 goes into the index)
and ``part-NNNNN.lst`` (im2rec's list: id, labels, path under SRC, one line per record):

- ``recordio``: ``.rec`` records are ``IRHeader(flag, label, id, 0)`` + the file's bytes, as
  im2rec packs them (several labels: ``flag`` of them, as float32 after the header); ``.idx``
  holds ``id<TAB>offset`` lines.
- ``tfrecord``: ``.tfrecord`` records are ``tf.train.Example`` with ``data`` (bytes),
  ``label`` (int64, or float when a ``.lst`` gives fractional labels), ``id`` (int64) and
  ``key`` (the path under SRC); ``.idx`` holds ``offset size`` lines (DALI's ``tfrecord2idx``).
- ``shards``: a trainops shard (``.tops``, see ``trainops.data.shards._format``) of IRHeader
  records as for RecordIO.

Records go out in SRC order; nothing here depends on timing or on the worker that runs it, so
the same input gives byte-identical files. Each format is registered in :data:`FORMATS`;
docs/internals/pack-formats.md says how to add one.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trainops._registry import Registry
from trainops.data._errors import PackError
from trainops.data.formats._example import encode_example
from trainops.data.formats._recordio import (
    RECORDIO_MAGIC,
    IRHeader,
    pack_irheader,
    recordio_frame,
)
from trainops.data.formats._tfrecord import tfrecord_frame
from trainops.data.packer._source import SourceFile
from trainops.data.shards._format import encode_shard
from trainops.data.shards._index import SHARD_FORMAT, ShardInfo

__all__ = ["FORMATS", "PackFormat", "Record"]

Record = tuple[SourceFile, bytes]
Writer = Callable[[Path, tuple[str, ...], Iterable[Record], bool], ShardInfo]
_CHUNK = 4 << 20
_MAGIC = struct.pack("<I", RECORDIO_MAGIC)
# re's literal search (memchr on the first byte, then compare) is about twice as fast as
# ``bytes in bytes`` (``0.3`` ns a byte against ``0.6``), on random, text and repetitive data
_find_magic = re.compile(re.escape(_MAGIC)).search
_IRHEADER = struct.Struct("<IfQQ")
_HEADS = struct.Struct("<IIIfQQ")  # RecordIO frame header (magic, length) + IRHeader
_PADDING = (b"", b"\0", b"\0\0", b"\0\0\0")


@dataclass(frozen=True, slots=True)
class PackFormat:
    """One output format: its file names, its ``index.json`` format name, and its writer.

    ``write(staging, names, records, float_labels)`` writes one shard's files (``names``, the
    data file first) into ``staging`` and describes the data file.
    """

    extension: str
    companions: tuple[str, ...]
    index_format: str
    write: Writer

    def files(self, number: int) -> tuple[str, ...]:
        """The names of shard ``number``'s files, the data file first."""
        stem = f"part-{number:05d}"
        return (f"{stem}.{self.extension}", *(f"{stem}.{ext}" for ext in self.companions))


def _irheader_record(file: SourceFile, data: bytes) -> bytes:
    label = file.labels[0] if len(file.labels) == 1 else file.labels
    return pack_irheader(IRHeader(0, label, file.record_id, 0), data)


def _recordio(file: SourceFile, data: bytes, float_labels: bool) -> bytes:
    try:
        return recordio_frame(_irheader_record(file, data))
    except ValueError as error:  # a RecordIO part over 2**29 - 1 bytes
        raise PackError(f"{file.key}: {error}") from None


def _tfrecord(file: SourceFile, data: bytes, float_labels: bool) -> bytes:
    labels = list(file.labels) if float_labels else [int(label) for label in file.labels]
    example = {"data": [data], "label": labels, "id": [file.record_id], "key": [file.key.encode()]}
    return tfrecord_frame(encode_example(example))


Framer = Callable[[bytearray, SourceFile, bytes, bool], int]
IdxText = Callable[[list[SourceFile], list[int], list[int]], str]


def _recordio_into(out: bytearray, file: SourceFile, data: bytes, float_labels: bool) -> int:
    """Append ``file``'s RecordIO record to ``out``; returns its size. A record with no magic
    (nearly all) is written in place: frame header and IRHeader in one ``pack``, then the
    bytes. The IRHeader is 24 bytes, so an aligned magic lies wholly in it or in the data; a
    magic anywhere (aligned or not) takes the general path, which splits as dmlc does."""
    labels = file.labels
    if len(labels) != 1 or _find_magic(data) is not None:
        return _append(out, _recordio(file, data, float_labels))
    length = _IRHEADER.size + len(data)
    if length >= 1 << 29:
        raise PackError(f"{file.key}: a RecordIO record holds at most 2**29 - 1 bytes")
    head = _HEADS.pack(RECORDIO_MAGIC, length, 0, labels[0], file.record_id, 0)
    if head.find(_MAGIC, 4) != -1:
        return _append(out, _recordio(file, data, float_labels))
    pad = -length % 4
    out += head
    out += data
    if pad:
        out += _PADDING[pad]
    return 8 + length + pad


def _tfrecord_into(out: bytearray, file: SourceFile, data: bytes, float_labels: bool) -> int:
    return _append(out, _tfrecord(file, data, float_labels))


def _append(out: bytearray, record: bytes) -> int:
    out += record
    return len(record)


def _recordio_idx(files: list[SourceFile], offsets: list[int], sizes: list[int]) -> str:
    """``id<TAB>offset`` lines, as ``MXIndexedRecordIO`` writes them."""
    return "".join(
        [f"{file.record_id}\t{offset}\n" for file, offset in zip(files, offsets, strict=True)]
    )


def _tfrecord_idx(files: list[SourceFile], offsets: list[int], sizes: list[int]) -> str:
    """``offset size`` lines, as DALI's ``tfrecord2idx`` writes them."""
    return "".join([f"{offset} {size}\n" for offset, size in zip(offsets, sizes, strict=True)])


def _lst_text(files: list[SourceFile]) -> str:
    """The shard's ``.lst``: ``_source_lst.format_lst_line`` for each file, with the labels formatted
    once per labels tuple (folder labels are shared tuples; keyed by identity, as ``0.0`` and
    ``-0.0`` are equal keys but print differently)."""
    distinct = {id(file.labels): file.labels for file in files}
    texts = {key: "".join(f"{label:f}\t" for label in labels) for key, labels in distinct.items()}
    return "".join([f"{f.record_id}\t{texts[id(f.labels)]}{f.key}\n" for f in files])


def _framed(frame: Framer, idx_text: IdxText) -> Writer:
    """A writer of records framed one after another, with a ``.idx`` (``idx_text`` of the
    files, their offsets and sizes) and a ``.lst``. Records are framed straight into a buffer
    written out every ``_CHUNK`` bytes (few large writes, one copy per record)."""

    def write(
        staging: Path, names: tuple[str, ...], records: Iterable[Record], float_labels: bool
    ) -> ShardInfo:
        digest, offset = hashlib.sha256(), 0
        files: list[SourceFile] = []
        offsets: list[int] = []
        sizes: list[int] = []
        buffer = bytearray()
        with open(staging / names[0], "wb") as data_file:
            for file, data in records:
                size = frame(buffer, file, data, float_labels)
                files.append(file)
                offsets.append(offset)
                sizes.append(size)
                offset += size
                if len(buffer) >= _CHUNK:
                    _flush(buffer, data_file, digest)
            _flush(buffer, data_file, digest)
        (staging / names[1]).write_text(idx_text(files, offsets, sizes), encoding="utf-8")
        (staging / names[2]).write_text(_lst_text(files), encoding="utf-8")
        return ShardInfo(names[0], len(files), offset, digest.hexdigest())

    return write


def _flush(buffer: bytearray, out: BinaryIO, digest: Any) -> None:
    view = memoryview(buffer)
    out.write(view)
    digest.update(view)
    view.release()
    del buffer[:]


def _write_tops(
    staging: Path, names: tuple[str, ...], records: Iterable[Record], float_labels: bool
) -> ShardInfo:
    files: list[SourceFile] = []
    payloads = []
    for file, data in records:
        files.append(file)
        payloads.append(_irheader_record(file, data))
    body = encode_shard(payloads)
    (staging / names[0]).write_bytes(body)
    (staging / names[1]).write_text(_lst_text(files), encoding="utf-8")
    return ShardInfo(names[0], len(files), len(body), hashlib.sha256(body).hexdigest())


#: ``--format`` value -> its format; ``trainops pack`` and tests/data/test_pack.py read it.
FORMATS: Registry[PackFormat] = Registry("pack format", error=PackError)
FORMATS.register(
    "recordio",
    PackFormat("rec", ("idx", "lst"), "recordio", _framed(_recordio_into, _recordio_idx)),
)
FORMATS.register(
    "tfrecord",
    PackFormat("tfrecord", ("idx", "lst"), "tfrecord", _framed(_tfrecord_into, _tfrecord_idx)),
)
FORMATS.register("shards", PackFormat("tops", ("lst",), SHARD_FORMAT, _write_tops))
