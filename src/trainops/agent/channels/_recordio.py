"""RecordIO framing for ``record_wrapping: RecordIO``: a record's header and its padding.

Temporary: this goes once ``trainops.data._recordio`` (the in-job RecordIO library) lands, and
the Pipe writer then frames with that one encoder. Until then the two words of a whole (flag 0)
MXNet/SageMaker record: ``u32 magic 0xced7230a | u32 length`` (little-endian), then the payload,
then zero bytes up to a multiple of 4.
"""

from __future__ import annotations

import struct

__all__ = ["MAX_RECORD", "frame_header", "frame_padding"]

MAX_RECORD = (1 << 29) - 1  # the length field has 29 bits; the top 3 are the part flag
_MAGIC = 0xCED7230A


def frame_header(size: int) -> bytes:
    return struct.pack("<II", _MAGIC, size)


def frame_padding(size: int) -> bytes:
    return b"\0" * (-size % 4)
