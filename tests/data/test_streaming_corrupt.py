"""Hostile or damaged datasets in a folder: each is one clear error naming the file and where."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from tests.data._streams import make_dataset
from trainops.data import CorruptRecordError, DatasetIndexError, StreamingDataset

COUNTS = [10, 20, 15]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    make_dataset(tmp_path / "ds", COUNTS)
    return tmp_path / "ds"


def _read_all(folder: Path, **options: object) -> None:
    list(StreamingDataset(folder, shuffle=False, **options))  # type: ignore[arg-type]


def test_a_folder_without_an_index_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(DatasetIndexError, match=r"index.json: no such file.*trainops pack"):
        StreamingDataset(tmp_path)


def test_a_garbage_index_names_the_file(folder: Path) -> None:
    (folder / "index.json").write_bytes(b"\x00garbage{")
    with pytest.raises(DatasetIndexError, match=r"ds/index.json: not JSON"):
        StreamingDataset(folder)


def test_an_index_of_recordio_shards_is_refused(folder: Path) -> None:
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**index, "format": "recordio"}))
    with pytest.raises(DatasetIndexError, match="'recordio' shards are not trainops shards"):
        StreamingDataset(folder)


def test_an_index_that_is_a_link_is_refused(folder: Path, tmp_path: Path) -> None:
    (folder / "index.json").rename(tmp_path / "elsewhere.json")
    (folder / "index.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(DatasetIndexError, match="symbolic link, refused"):
        StreamingDataset(folder)


def test_a_shard_that_is_a_link_out_of_the_folder_is_never_read(
    folder: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.tops"
    (folder / "part-00001.tops").rename(outside)
    (folder / "part-00001.tops").symlink_to(outside)
    with pytest.raises(CorruptRecordError, match=r"part-00001.tops: .*symbolic link, refused"):
        _read_all(folder)


def test_a_missing_shard_is_named(folder: Path) -> None:
    (folder / "part-00002.tops").unlink()
    with pytest.raises(CorruptRecordError, match=r"part-00002.tops: .*No such file"):
        _read_all(folder)


def test_a_truncated_shard_is_named_with_its_sizes(folder: Path) -> None:
    shard = folder / "part-00001.tops"
    data = shard.read_bytes()
    shard.write_bytes(data[:-5])
    with pytest.raises(CorruptRecordError, match=rf"{len(data) - 5} bytes, index.json says"):
        _read_all(folder)


def test_a_damaged_offset_table_is_named_by_byte_offset(folder: Path) -> None:
    shard = folder / "part-00000.tops"
    data = bytearray(shard.read_bytes())
    data[32 + 8 * 3 : 32 + 8 * 4] = struct.pack("<Q", 1)  # record 3 starts before record 2
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=r"part-00000.tops: corrupt record at byte 56"):
        _read_all(folder)


def test_a_shard_with_other_records_than_the_index_says_is_refused(folder: Path) -> None:
    index = json.loads((folder / "index.json").read_text())
    index["shards"][0]["records"] = 11
    index["total_records"] = sum(s["records"] for s in index["shards"])
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(CorruptRecordError, match=r"10 records, index\.json says 11"):
        _read_all(folder)


def test_verify_catches_a_changed_byte_the_layout_cannot(folder: Path) -> None:
    shard = folder / "part-00002.tops"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    _read_all(folder)  # the layout is intact: without verify the byte goes unnoticed
    with pytest.raises(CorruptRecordError, match=r"part-00002.tops: .*sha256 is"):
        _read_all(folder, verify=True)


def test_a_fifo_in_place_of_a_shard_is_refused_without_blocking(folder: Path) -> None:
    (folder / "part-00000.tops").unlink()
    os.mkfifo(folder / "part-00000.tops")
    with pytest.raises(CorruptRecordError, match="not a regular file"):
        _read_all(folder)


def test_a_cache_folder_others_may_write_in_is_refused(tmp_path: Path) -> None:
    from trainops.data.shards._cache import ShardCache

    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    with pytest.raises(CorruptRecordError, match="others may write in it"):
        ShardCache(tmp_path / "open", 1 << 20).prepare()
    ShardCache(tmp_path / "mine", 1 << 20).prepare()  # made here: 0700, accepted
    assert (tmp_path / "mine").stat().st_mode & 0o777 == 0o700
