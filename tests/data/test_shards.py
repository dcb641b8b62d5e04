"""trainops' shard format: the byte layout, blocks of records, checksums and hostile shards."""

from __future__ import annotations

import hashlib
import json
import pickle
import struct
import tracemalloc
from pathlib import Path

import pytest

from trainops.data import (
    SHARD_MAGIC,
    CorruptRecordError,
    DatasetIndexError,
    ShardIndex,
    ShardInfo,
    ShardReader,
    encode_shard,
    write_shard,
)

RECORDS = [b"alpha", b"", b"gamma-gamma", b"d" * 1000]


def test_the_layout_is_the_documented_one() -> None:
    data = encode_shard([b"ab", b"cde"])
    head = SHARD_MAGIC + struct.pack("<IIQQ", 1, 0, 2, 61)
    table = struct.pack("<3Q", 56, 58, 61)
    assert data == head + table + b"abcde"


def test_records_and_blocks_read_from_a_path_and_from_bytes(tmp_path: Path) -> None:
    info = write_shard(tmp_path / "s.tops", RECORDS)
    data = (tmp_path / "s.tops").read_bytes()
    assert info == ShardInfo("s.tops", 4, len(data), hashlib.sha256(data).hexdigest())
    assert [p.name for p in tmp_path.iterdir()] == ["s.tops"]
    for reader in (ShardReader.open(tmp_path / "s.tops"), ShardReader(data, source="bytes")):
        with reader:
            assert len(reader) == 4
            assert [bytes(r) for r in reader] == RECORDS
            assert bytes(reader.record(2)) == b"gamma-gamma"
            block = reader.block(1, 4)
            assert bytes(block.data) == b"".join(RECORDS[1:4])
            assert [bytes(r) for r in block] == RECORDS[1:4]
            assert bytes(block[-1]) == RECORDS[3]
            assert len(reader.block(2, 2)) == 0


def test_a_block_pickles_as_its_bytes(tmp_path: Path) -> None:
    write_shard(tmp_path / "s.tops", RECORDS)
    reader = ShardReader.open(tmp_path / "s.tops")
    block = pickle.loads(pickle.dumps(reader.block(0, 3)))
    reader.close()  # the unpickled block owns its bytes
    assert [bytes(r) for r in block] == RECORDS[:3]


def test_closing_while_a_block_is_held_keeps_the_block_readable(tmp_path: Path) -> None:
    write_shard(tmp_path / "s.tops", RECORDS)
    reader = ShardReader.open(tmp_path / "s.tops")
    block = reader.block(0, 1)
    reader.close()
    assert bytes(block[0]) == b"alpha"


def test_an_empty_shard_is_valid() -> None:
    assert len(ShardReader(encode_shard([]), source="e")) == 0


def test_the_checksum_is_verified_on_request() -> None:
    data = encode_shard(RECORDS)
    good = hashlib.sha256(data).hexdigest()
    assert len(ShardReader(data, source="s", sha256=good)) == 4
    flipped = data[:-1] + b"X"
    with pytest.raises(
        CorruptRecordError, match=f"s: corrupt record at byte 0: sha256 is .* says {good}"
    ):
        ShardReader(flipped, source="s", sha256=good)


@pytest.mark.parametrize("cut", [0, 5, 31, 32, 40, 70, -1])
def test_a_truncated_shard_names_the_file_and_offset(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "cut.tops"
    path.write_bytes(encode_shard(RECORDS)[:cut])
    with pytest.raises(CorruptRecordError, match=rf"{path}: corrupt record at byte (0|24): "):
        ShardReader.open(path)


def test_garbage_is_not_a_shard() -> None:
    with pytest.raises(
        CorruptRecordError, match=r"g: corrupt record at byte 0: not a trainops shard"
    ):
        ShardReader(b"\x89PNG" + b"\0" * 60, source="g")


def test_a_newer_version_is_refused() -> None:
    data = bytearray(encode_shard(RECORDS))
    data[8] = 2
    with pytest.raises(CorruptRecordError, match="at byte 8: unsupported shard version 2"):
        ShardReader(bytes(data), source="v")


def test_a_hostile_record_count_allocates_nothing() -> None:
    data = bytearray(encode_shard(RECORDS))
    struct.pack_into("<Q", data, 16, 1 << 60)
    tracemalloc.start()
    try:
        with pytest.raises(
            CorruptRecordError, match="at byte 16: 1152921504606846976 records cannot"
        ):
            ShardReader(bytes(data), source="h")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_offsets_out_of_order_or_out_of_place_are_named() -> None:
    data = bytearray(encode_shard(RECORDS))
    struct.pack_into("<Q", data, 32 + 8 * 2, 10_000)
    with pytest.raises(CorruptRecordError, match="at byte 56: offset of record 3 goes backwards"):
        ShardReader(bytes(data), source="o")
    data = bytearray(encode_shard(RECORDS))
    struct.pack_into("<Q", data, 32, 0)
    with pytest.raises(CorruptRecordError, match="at byte 32: record 0 starts at 0, not 72"):
        ShardReader(bytes(data), source="o")
    data = bytearray(encode_shard(RECORDS))
    struct.pack_into("<Q", data, 32 + 8 * 4, 5)
    with pytest.raises(CorruptRecordError, match="at byte 64: records end at 5"):
        ShardReader(bytes(data), source="o")


def test_trailing_bytes_are_refused() -> None:
    with pytest.raises(CorruptRecordError, match="at byte 24: header says"):
        ShardReader(encode_shard(RECORDS) + b"extra", source="t")


def test_the_index_round_trips() -> None:
    shards = (ShardInfo("a.tops", 3, 100, "0" * 64), ShardInfo("b.tops", 2, 90, "f" * 64))
    index = ShardIndex(shards, config={"shard_size": 100})
    text = index.to_json()
    assert ShardIndex.parse(text) == index
    assert '"total_records": 5' in text
    assert '"format": "trainops-shards"' in text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"format": "parquet"}, "format: expected one of"),
        ({"version": 2}, "version: 2 is not 1"),
        ({"total_records": 4}, "total_records: is not the shards' sum"),
        ({"shards": {}}, "shards: expected a list"),
        (
            {
                "shards": [
                    {"name": "../../etc/passwd", "records": 1, "bytes": 1, "sha256": "0" * 64}
                ]
            },
            r"shards\[0\].name: '../../etc/passwd' is not a plain file name",
        ),
        (
            {"shards": [{"name": "a/b", "records": 1, "bytes": 1, "sha256": "0" * 64}]},
            r"shards\[0\].name",
        ),
        (
            {"shards": [{"name": "a", "records": True, "bytes": 1, "sha256": "0" * 64}]},
            r"shards\[0\].records: expected a count",
        ),
        (
            {"shards": [{"name": "a", "records": 1, "bytes": -1, "sha256": "0" * 64}]},
            r"shards\[0\].bytes",
        ),
        (
            {"shards": [{"name": "a", "records": 1, "bytes": 1, "sha256": "XYZ"}]},
            r"shards\[0\].sha256: expected 64 lowercase hex digits",
        ),
    ],
)
def test_a_bad_index_names_the_field(edit: dict[str, object], message: str) -> None:
    body: dict[str, object] = {
        "format": "trainops-shards",
        "version": 1,
        "total_records": 0,
        "shards": [],
    }
    body.update(edit)
    if "total_records" not in edit and isinstance(body["shards"], list):
        body["total_records"] = sum(s["records"] for s in body["shards"])  # type: ignore[misc,index]
    with pytest.raises(DatasetIndexError, match=f"data/index.json: {message}"):
        ShardIndex.parse(json.dumps(body), source="data/index.json")


def test_an_index_that_is_not_json_or_nests_forever_is_one_error() -> None:
    with pytest.raises(DatasetIndexError, match=r"i\.json: not JSON"):
        ShardIndex.parse(b"\xff\xfe", source="i.json")
    with pytest.raises(DatasetIndexError, match=r"i\.json: not JSON"):
        ShardIndex.parse("[" * 100_000, source="i.json")
