"""RecordIO framing, reading, IRHeader and .idx against bytes built by hand from dmlc's spec."""

from __future__ import annotations

import io
import logging
import random
import struct
import tracemalloc

import pytest

from trainops.data import (
    RECORDIO_MAGIC,
    CorruptRecordError,
    IRHeader,
    RecordIOReader,
    RecordIOWriter,
    pack_irheader,
    read_idx,
    recordio_frame,
    unpack_irheader,
    write_idx,
)

MAGIC = struct.pack("<I", RECORDIO_MAGIC)


def part(data: bytes, cflag: int = 0) -> bytes:
    return (
        struct.pack("<II", RECORDIO_MAGIC, cflag << 29 | len(data))
        + data
        + b"\0" * (-len(data) % 4)
    )


def read_all(data: bytes, **kwargs: object) -> list[bytes]:
    return list(RecordIOReader(io.BytesIO(data), source="test.rec", **kwargs))  # type: ignore[arg-type]


def test_a_plain_record_is_header_data_and_padding() -> None:
    assert recordio_frame(b"hello") == part(b"hello")
    assert recordio_frame(b"") == struct.pack("<II", RECORDIO_MAGIC, 0)
    assert recordio_frame(b"abcd") == part(b"abcd")


def test_an_aligned_magic_splits_the_record_and_is_dropped() -> None:
    payload = b"abcd" + MAGIC + b"efgh" + MAGIC + b"ij"
    assert recordio_frame(payload) == part(b"abcd", 1) + part(b"efgh", 2) + part(b"ij", 3)
    assert read_all(recordio_frame(payload)) == [payload]


def test_an_unaligned_magic_is_left_alone() -> None:
    payload = b"ab" + MAGIC + b"c"
    assert recordio_frame(payload) == part(payload)


def test_a_payload_that_is_only_magics_round_trips() -> None:
    payload = MAGIC * 3
    framed = recordio_frame(payload)
    flags = [struct.unpack_from("<I", framed, at + 4)[0] >> 29 for at in range(0, len(framed), 8)]
    assert flags == [1, 2, 2, 3]
    assert read_all(framed) == [payload]


@pytest.mark.parametrize("block_size", [1, 3, 8, 4096])
def test_random_payloads_round_trip_whatever_the_block_size(block_size: int) -> None:
    rng = random.Random(block_size)
    payloads = []
    for _ in range(300):
        words = [
            rng.choice([MAGIC, b"\0\0\0\0", rng.randbytes(4)]) for _ in range(rng.randrange(6))
        ]
        payloads.append(b"".join(words) + rng.randbytes(rng.randrange(5)))
    out = io.BytesIO()
    writer = RecordIOWriter(out)
    offsets = [writer.write(payload) for payload in payloads]
    reader = RecordIOReader(io.BytesIO(out.getvalue()), block_size=block_size)
    assert list(reader.records()) == list(zip(offsets, payloads, strict=True))
    assert writer.offset == len(out.getvalue())


def test_a_bad_magic_names_the_file_and_offset() -> None:
    data = part(b"first") + b"\x01\x02\x03\x04" + struct.pack("<I", 4) + b"xxxx" + part(b"last")
    with pytest.raises(
        CorruptRecordError, match=r"test\.rec: corrupt record at byte 16: bad magic"
    ):
        read_all(data)


def test_a_truncated_record_names_where_it_starts() -> None:
    data = part(b"first") + part(b"0123456789")[:-5]
    with pytest.raises(
        CorruptRecordError, match=r"at byte 16: truncated: part of 10 bytes, 7 remain"
    ):
        read_all(data)
    with pytest.raises(CorruptRecordError, match=r"at byte 16: truncated: 5 byte"):
        read_all(part(b"first") + MAGIC + b"\0")


def test_parts_out_of_order_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match=r"at byte 0: continuation part \(cflag 3\)"):
        read_all(part(b"tail", 3))
    with pytest.raises(CorruptRecordError, match=r"at byte 0: multi-part record cut short"):
        read_all(part(b"head", 1) + part(b"whole"))


def test_max_corrupt_skips_bad_records_and_logs_the_count_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    garbage = b"\xff" * 12
    data = part(b"a") + garbage + part(b"b") + part(b"tail", 3) + part(b"c") + part(b"d")[:-2]
    with caplog.at_level(logging.WARNING, logger="trainops.data"):
        reader = RecordIOReader(io.BytesIO(data), source="channel train, epoch 2", max_corrupt=3)
        assert list(reader) == [b"a", b"b", b"c"]
    assert reader.skipped == 3
    assert [r.getMessage() for r in caplog.records] == [
        "channel train, epoch 2: skipped 3 corrupt record(s) (max_corrupt=3)"
    ]
    with pytest.raises(
        CorruptRecordError, match="channel train, epoch 2: corrupt record at byte 60"
    ):
        list(RecordIOReader(io.BytesIO(data), source="channel train, epoch 2", max_corrupt=2))


def test_the_multi_part_record_cut_short_keeps_the_record_that_cut_it() -> None:
    data = part(b"head", 1) + part(b"whole") + part(b"next")
    assert read_all(data, max_corrupt=1) == [b"whole", b"next"]


def test_a_hostile_length_allocates_nothing_like_it() -> None:
    data = struct.pack("<II", RECORDIO_MAGIC, (1 << 29) - 1) + b"x" * 100
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="truncated: part of 536870911 bytes"):
            read_all(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_max_record_bytes_bounds_a_multi_part_record() -> None:
    data = part(b"x" * 64, 1) + part(b"y" * 64, 3)
    assert read_all(data, max_record_bytes=132) == [b"x" * 64 + MAGIC + b"y" * 64]
    with pytest.raises(CorruptRecordError, match="at byte 72: record of 128 bytes exceeds"):
        read_all(data, max_record_bytes=100)


def test_irheader_with_one_label_matches_mxnet_bytes() -> None:
    packed = pack_irheader(IRHeader(0, 3.0, 7, 0), b"jpeg")
    assert packed == struct.pack("<IfQQ", 0, 3.0, 7, 0) + b"jpeg"
    assert unpack_irheader(packed) == (IRHeader(0, 3.0, 7, 0), b"jpeg")


def test_irheader_with_many_labels_puts_them_before_the_data() -> None:
    packed = pack_irheader(IRHeader(0, (1.0, 2.5), 9, 1), b"img")
    assert packed == struct.pack("<IfQQ2f", 2, 0.0, 9, 1, 1.0, 2.5) + b"img"
    assert unpack_irheader(packed) == (IRHeader(2, (1.0, 2.5), 9, 1), b"img")


def test_a_bad_irheader_is_a_clear_error() -> None:
    with pytest.raises(CorruptRecordError, match=r"a\.rec: corrupt record at byte 40: 10 bytes"):
        unpack_irheader(b"x" * 10, source="a.rec", offset=40)
    hostile = struct.pack("<IfQQ", 0xFFFFFFFF, 0.0, 0, 0)
    with pytest.raises(CorruptRecordError, match="claims 4294967295 labels"):
        unpack_irheader(hostile)


def test_idx_round_trips_and_names_a_bad_line_by_offset() -> None:
    text = io.StringIO()
    write_idx(text, [(0, 0), (1, 1032), (5, 2064)])
    assert text.getvalue() == "0\t0\n1\t1032\n5\t2064\n"
    assert read_idx(io.BytesIO(text.getvalue().encode())) == [(0, 0), (1, 1032), (5, 2064)]
    with pytest.raises(CorruptRecordError, match=r"x.idx: corrupt record at byte 4: line 2 is not"):
        read_idx(io.BytesIO(b"0\t0\n1 32\n"), source="x.idx")
    with pytest.raises(CorruptRecordError, match="line 1 has a negative number"):
        read_idx(io.BytesIO(b"0\t-4\n"))
    with pytest.raises(CorruptRecordError, match="line 1 is too long"):
        read_idx(io.BytesIO(b"1\t" + b"9" * 10_000_000))


def test_a_continuation_flag_above_3_is_corrupt() -> None:
    data = part(b"ok") + struct.pack("<II", RECORDIO_MAGIC, 5 << 29 | 4) + b"abcd"
    with pytest.raises(CorruptRecordError, match="at byte 12: bad continuation flag 5"):
        read_all(data)
