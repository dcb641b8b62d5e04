"""The peer of bench/pack.py: im2rec's packing as a plain Python loop, in one process.

Lists SRC's class folders as im2rec does (sorted folders give labels 0, 1, ...), then for each
file reads it and appends one record (``IRHeader`` + bytes, RecordIO framing, as
``mxnet.recordio.pack`` and ``MXIndexedRecordIO.write_idx`` write it) to one ``.rec``, with its
``.idx`` and ``.lst``. No sharding, no checksums: the least a packer must do. With ``--fsync`` it also flushes
its three files to disk at the end (what trainops does for every shard before renaming it).

    python bench/_im2rec_loop.py SRC DEST_PREFIX [--fsync]
"""

from __future__ import annotations

import os
import struct
import sys

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)


def frame(payload: bytes) -> bytes:
    # mxnet.recordio writes through dmlc's writer, which splits at aligned magics; random
    # payloads almost never hold one, so the common single-part case is what costs.
    if MAGIC_BYTES in payload:
        at = payload.find(MAGIC_BYTES)
        while at != -1 and at % 4:
            at = payload.find(MAGIC_BYTES, at + 1)
        if at != -1:
            raise SystemExit("a payload holds an aligned magic: not part of this benchmark")
    pad = -len(payload) % 4
    return struct.pack("<II", MAGIC, len(payload)) + payload + b"\0" * pad


def main(src: str, prefix: str, durable: bool) -> None:
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    with (
        open(prefix + ".rec", "wb") as rec,
        open(prefix + ".idx", "w") as idx,
        open(prefix + ".lst", "w") as lst,
    ):
        offset, index = 0, 0
        for label, name in enumerate(classes):
            folder = os.path.join(src, name)
            for fname in sorted(os.listdir(folder)):
                with open(os.path.join(folder, fname), "rb") as handle:
                    data = handle.read()
                header = struct.pack("<IfQQ", 0, float(label), index, 0)
                record = frame(header + data)
                rec.write(record)
                idx.write(f"{index}\t{offset}\n")
                lst.write(f"{index}\t{float(label):f}\t{name}/{fname}\n")
                offset += len(record)
                index += 1
        if durable:
            for handle in (rec, idx, lst):
                handle.flush()
                os.fsync(handle.fileno())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--fsync" in sys.argv[3:])
