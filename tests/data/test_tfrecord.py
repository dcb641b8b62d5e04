"""TFRecord and tf.train.Example: bytes built from the spec, files written and read by
TensorFlow itself (in a subprocess, when it is installed), corrupt and hostile records."""

from __future__ import annotations

import io
import json
import logging
import os
import struct
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import google_crc32c
import pytest

from tests._support.system import require_extra
from trainops.data import (
    CorruptRecordError,
    TFRecordReader,
    TFRecordWriter,
    decode_example,
    encode_example,
    masked_crc32c,
    tfrecord_frame,
)
from trainops.data.formats._tfrecord import crc32c_python

PAYLOADS = [b"", b"one", b"\x00" * 100, bytes(range(256)) * 40]


def masked(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) % (1 << 32)


def frame(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data))


def read_all(data: bytes, **kwargs: object) -> list[bytes]:
    return list(TFRecordReader(io.BytesIO(data), source="t.tfrecord", **kwargs))  # type: ignore[arg-type]


def test_the_masked_crc_and_frame_follow_the_spec() -> None:
    # CRC32C("123456789") is the standard check value 0xE3069283.
    crc = 0xE3069283
    assert masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) % (1 << 32)
    for payload in PAYLOADS:
        assert tfrecord_frame(payload) == frame(payload)


def test_the_python_crc32c_is_the_library_s() -> None:
    """Where google_crc32c is not installed (a job's own interpreter the debugger hook writes
    from), the table-driven CRC32C in Python gives the same values."""
    assert crc32c_python(b"123456789") == 0xE3069283
    for payload in [*PAYLOADS, os.urandom(4097)]:
        assert crc32c_python(payload) == google_crc32c.value(payload)


@pytest.mark.parametrize("block_size", [1, 5, 1 << 20])
def test_records_round_trip_with_offsets(block_size: int) -> None:
    out = io.BytesIO()
    writer = TFRecordWriter(out)
    offsets = [writer.write(p) for p in PAYLOADS]
    reader = TFRecordReader(io.BytesIO(out.getvalue()), block_size=block_size)
    assert list(reader.records()) == list(zip(offsets, PAYLOADS, strict=True))


def test_a_flipped_data_byte_fails_only_the_full_check() -> None:
    data = bytearray(frame(b"first") + frame(b"second"))
    data[len(frame(b"first")) + 12] ^= 0xFF
    with pytest.raises(
        CorruptRecordError, match=r"t\.tfrecord: corrupt record at byte 21: data CRC"
    ):
        read_all(bytes(data))
    assert read_all(bytes(data), verify="length") == [b"first", b"\x8cecond"]
    assert read_all(bytes(data), verify="none") == [b"first", b"\x8cecond"]


def test_a_flipped_length_byte_fails_the_length_check() -> None:
    data = bytearray(frame(b"abc") + frame(b"def"))
    data[0] ^= 0x01
    with pytest.raises(CorruptRecordError, match="at byte 0: length CRC mismatch"):
        read_all(bytes(data), verify="length")


def test_skipping_a_corrupt_record_finds_the_next_header(caplog: pytest.LogCaptureFixture) -> None:
    data = bytearray(frame(b"a" * 50) + frame(b"b" * 50) + frame(b"c" * 50))
    data[90] ^= 0xFF
    with caplog.at_level(logging.WARNING, logger="trainops.data"):
        assert read_all(bytes(data), max_corrupt=1) == [b"a" * 50, b"c" * 50]
    assert "t.tfrecord: skipped 1 corrupt record(s)" in caplog.text
    with pytest.raises(CorruptRecordError, match="at byte 66: data CRC mismatch"):
        read_all(bytes(data))


def test_garbage_then_records_with_a_budget() -> None:
    data = b"garbage!" * 7 + frame(b"kept")
    assert read_all(data, max_corrupt=1) == [b"kept"]


def test_a_truncated_record_is_named() -> None:
    data = frame(b"whole") + frame(b"cut short")[:-3]
    with pytest.raises(
        CorruptRecordError, match="at byte 21: truncated: record of 9 bytes, 10 remain"
    ):
        read_all(data)
    with pytest.raises(CorruptRecordError, match="at byte 21: truncated: 7 byte"):
        read_all(frame(b"whole") + b"\x01" * 7)


def test_a_hostile_length_allocates_nothing_like_it() -> None:
    length = struct.pack("<Q", 1 << 40)
    hostile = length + struct.pack("<I", masked(length)) + b"x" * 64
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="record of 1099511627776 bytes exceeds"):
            read_all(hostile, verify="none")
        small_len = (1 << 29).to_bytes(8, "little")
        with pytest.raises(CorruptRecordError, match="truncated: record of 536870912 bytes"):
            read_all(small_len + struct.pack("<I", masked(small_len)) + b"x" * 64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_an_unknown_verify_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="verify must be one of"):
        TFRecordReader(io.BytesIO(b""), verify="some")  # type: ignore[arg-type]


def test_examples_round_trip() -> None:
    features = {"data": [b"\x89PNG..."], "label": [3, -1, 1 << 40], "weight": [0.5, 2.0]}
    assert decode_example(encode_example(features)) == features


def test_a_record_that_is_not_an_example_is_named() -> None:
    with pytest.raises(
        CorruptRecordError, match=r"x\.tfrecord: corrupt record at byte 96: not a tf"
    ):
        decode_example(b"\x0a\xff\xff\xff\x0f", source="x.tfrecord", offset=96)


_TF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    out, mine = sys.argv[1], sys.argv[2]
    with tf.io.TFRecordWriter(out) as writer:
        for i in range(3):
            example = tf.train.Example(features=tf.train.Features(feature={
                "data": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x" * i])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i, -i])),
                "score": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 4])),
            }))
            writer.write(example.SerializeToString())
        writer.write(b"raw bytes")
    spec = {"data": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([2], tf.int64)}
    seen = []
    for record in tf.data.TFRecordDataset(mine):
        parsed = tf.io.parse_single_example(record, spec)
        seen.append([parsed["data"].numpy().decode(), parsed["label"].numpy().tolist()])
    print(json.dumps(seen))
    """
)


@pytest.mark.slow
def test_files_interoperate_with_tensorflow(tmp_path: Path) -> None:
    require_extra("tensorflow")  # make test installs it: in CI, its absence fails
    theirs, mine = tmp_path / "tf.tfrecord", tmp_path / "mine.tfrecord"
    with open(mine, "wb") as handle:
        writer = TFRecordWriter(handle)
        for i in range(2):
            writer.write(encode_example({"data": [f"img{i}".encode()], "label": [i, 7]}))
    done = subprocess.run(
        [sys.executable, "-c", _TF_SCRIPT, str(theirs), str(mine)],
        capture_output=True,
        text=True,
        check=True,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [["img0", [0, 7]], ["img1", [1, 7]]]
    with open(theirs, "rb") as handle:
        records = list(TFRecordReader(handle, source=str(theirs)))
    assert records[-1] == b"raw bytes"
    assert [decode_example(r) for r in records[:-1]] == [
        {"data": [b"x" * i], "label": [i, -i], "score": [i / 4]} for i in range(3)
    ]
