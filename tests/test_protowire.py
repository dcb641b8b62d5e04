"""The hand-written protobuf wire format: protobuf's encoding, and a decoder bounded by its input."""

from __future__ import annotations

import pytest

from trainops._protowire import WireError, fields, len_field, varint, varint_field


def test_varints_are_protobufs() -> None:
    assert varint(0) == b"\x00" and varint(300) == b"\xac\x02"
    assert varint(-1) == b"\xff" * 9 + b"\x01"  # an int64 -1: ten bytes


def test_fields_walk_a_message() -> None:
    message = varint_field(1, 150) + len_field(2, b"abc")
    walked = [
        (n, k, bytes(v) if isinstance(v, memoryview) else v) for n, k, _, v in fields(message)
    ]
    assert walked == [(1, 0, 150), (2, 2, b"abc")]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x08", "byte 1: truncated varint"),
        (b"\x08" + b"\xff" * 11, "varint longer than 10 bytes"),
        (b"\x12\x05ab", "byte 0: field of 5 bytes runs past the message's end"),
        (b"\x12" + varint(1 << 40), "runs past the message's end"),
        (b"\x0b", "unsupported wire type 3"),
        (b"\x00\x00", "field number 0"),
        (b"\x09\x00\x00", "truncated fixed-width field"),
    ],
)
def test_malformed_messages_are_one_error_with_the_offset(data: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        list(fields(data))
