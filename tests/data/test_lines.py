"""Text-line records: endings, offsets, bad encodings and overlong lines, skipped or named."""

from __future__ import annotations

import io
import logging
import tracemalloc

import pytest

from trainops.data import CorruptRecordError, LineReader


def lines(data: bytes, **kwargs: object) -> list[str]:
    return list(LineReader(io.BytesIO(data), source="train.txt", **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize("block_size", [1, 2, 7, 1 << 20])
def test_lines_and_their_offsets(block_size: int) -> None:
    data = b"first\nsecond\r\n\nlast without newline"
    reader = LineReader(io.BytesIO(data), block_size=block_size)
    assert list(reader.records()) == [
        (0, "first"),
        (6, "second"),
        (14, ""),
        (15, "last without newline"),
    ]


def test_an_empty_stream_and_a_lone_newline() -> None:
    assert lines(b"") == []
    assert lines(b"\n") == [""]


def test_a_bad_byte_is_named_by_its_offset() -> None:
    with pytest.raises(
        CorruptRecordError, match=r"train\.txt: corrupt record at byte 8: not utf-8"
    ):
        lines(b"ok\nalso \xffbad\nfine\n")


def test_bad_lines_are_skipped_up_to_the_limit(caplog: pytest.LogCaptureFixture) -> None:
    data = b"a\n\xff\nb\n\xfe\xfe\nc\n"
    with caplog.at_level(logging.WARNING, logger="trainops.data"):
        reader = LineReader(io.BytesIO(data), source="channel train, epoch 2", max_corrupt=2)
        assert list(reader) == ["a", "b", "c"]
    assert reader.skipped == 2
    assert caplog.messages == [
        "channel train, epoch 2: skipped 2 corrupt record(s) (max_corrupt=2)"
    ]
    with pytest.raises(
        CorruptRecordError, match="channel train, epoch 2: corrupt record at byte 6"
    ):
        list(LineReader(io.BytesIO(data), source="channel train, epoch 2", max_corrupt=1))


@pytest.mark.parametrize("block_size", [3, 1 << 20])
def test_an_overlong_line_is_corrupt_and_bounded(block_size: int) -> None:
    data = b"short\n" + b"x" * 5000 + b"\nafter\n"
    assert lines(data, max_line_bytes=5000, block_size=block_size) == ["short", "x" * 5000, "after"]
    with pytest.raises(CorruptRecordError, match="at byte 6: line longer than 100 bytes"):
        lines(data, max_line_bytes=100, block_size=block_size)
    assert lines(data, max_line_bytes=100, max_corrupt=1, block_size=block_size) == [
        "short",
        "after",
    ]


def test_a_file_without_newlines_is_not_read_whole() -> None:
    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            buffer[:] = b"y" * len(buffer)
            return len(buffer)

    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="line longer than 1048576 bytes"):
            list(LineReader(Endless(), max_line_bytes=1 << 20, block_size=1 << 16))  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_other_encodings_and_an_unknown_one() -> None:
    assert lines("é\n".encode("latin-1"), encoding="latin-1") == ["é"]
    with pytest.raises(LookupError):
        LineReader(io.BytesIO(b""), encoding="no-such-codec")
