"""What a Pipe channel streams: each host's share and order per epoch (ShardedByKey, ShuffleConfig),
gzip objects decompressed, RecordIO records, and errors that name the object."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import pytest

from tests.agent.channels._support import (
    Host,
    channel,
    read_epoch,
    recordio_records,
    wait_for_path,
    wait_until,
)
from trainops._settings import MIB, Settings, TransferSettings
from trainops.agent.channels import PipeChannel, assign_objects, open_channel
from trainops.data import RECORDIO_MAGIC, RecordIOReader
from trainops.storage import store_for

SIZE = 64  # every object of the sharding dataset: its number, padded


@pytest.fixture
def numbered(tmp_path: Path) -> Path:
    data = tmp_path / "numbered"
    data.mkdir()
    for i in range(23):
        (data / f"{i:04d}").write_bytes(f"{i}".encode().ljust(SIZE, b"."))
    return data


def _hosts(count: int) -> list[str]:
    return [f"algo-{i}" for i in range(1, count + 1)]


def _epochs(
    tmp_path: Path, data: Path, hosts: list[str], epochs: int, **fields: object
) -> dict[str, list[list[int]]]:
    """For each host, the object numbers it streamed in each epoch."""
    seen: dict[str, list[list[int]]] = {}
    for name in hosts:
        host = Host(tmp_path / "hosts", Settings(home=tmp_path), hosts, name)
        source = open_channel(channel(data.as_uri(), mode="Pipe", **fields), host.context())
        source.prepare()
        try:
            seen[name] = [_numbers(read_epoch(host.data_dir, "train", e)) for e in range(epochs)]
        finally:
            source.close()
    return seen


def _numbers(stream: bytes) -> list[int]:
    assert len(stream) % SIZE == 0
    return [int(stream[i : i + SIZE].rstrip(b".")) for i in range(0, len(stream), SIZE)]


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_sharded_shares_cover_everything_once_and_move_every_epoch(
    tmp_path: Path, numbered: Path, count: int
) -> None:
    seen = _epochs(
        tmp_path, numbered, _hosts(count), 3, distribution="ShardedByKey", shuffle_seed=9
    )
    for epoch in range(3):
        shares = [seen[h][epoch] for h in _hosts(count)]
        flat = [n for share in shares for n in share]
        assert sorted(flat) == list(range(23))  # complete and disjoint
        assert max(map(len, shares)) - min(map(len, shares)) <= 1  # balanced
    for host in _hosts(count):
        assert seen[host][0] != seen[host][1] != seen[host][2]  # reshuffled every epoch
    if count > 1:  # and an object may go to another host
        assert set(seen["algo-1"][0]) != set(seen["algo-1"][1])


def test_the_order_is_the_same_on_every_run(tmp_path: Path, numbered: Path) -> None:
    first = _epochs(
        tmp_path / "a", numbered, _hosts(2), 3, distribution="ShardedByKey", shuffle_seed=4
    )
    again = _epochs(
        tmp_path / "b", numbered, _hosts(2), 3, distribution="ShardedByKey", shuffle_seed=4
    )
    other = _epochs(
        tmp_path / "c", numbered, _hosts(2), 3, distribution="ShardedByKey", shuffle_seed=5
    )
    assert first == again
    assert first != other


def test_epoch_0_is_file_modes_share(tmp_path: Path, numbered: Path) -> None:
    seen = _epochs(tmp_path, numbered, _hosts(3), 1, distribution="ShardedByKey", shuffle_seed=2)
    listed = store_for(numbered.as_uri(), Settings(home=tmp_path)).list_objects(numbered.as_uri())
    for host in _hosts(3):
        file_mode = assign_objects(listed, _hosts(3), host, "ShardedByKey", 2)
        assert seen[host][0] == [int(info.key) for info in file_mode]


def test_without_a_seed_every_epoch_repeats_the_first(tmp_path: Path, numbered: Path) -> None:
    seen = _epochs(tmp_path, numbered, _hosts(2), 3, distribution="ShardedByKey")
    assert seen["algo-1"] == [list(range(0, 23, 2))] * 3
    assert seen["algo-2"] == [list(range(1, 23, 2))] * 3


def test_fully_replicated_with_a_seed_gives_every_host_the_same_order(
    tmp_path: Path, numbered: Path
) -> None:
    seen = _epochs(tmp_path, numbered, _hosts(2), 2, shuffle_seed=3)
    assert seen["algo-1"] == seen["algo-2"]
    assert sorted(seen["algo-1"][1]) == list(range(23))


def _pipe(host: Host, uri: str, **fields: object) -> PipeChannel:
    source = open_channel(channel(uri, mode="Pipe", **fields), host.context())
    assert isinstance(source, PipeChannel)
    source.prepare()
    return source


def _gzip_members(data: bytes, parts: int) -> bytes:
    step = max(1, len(data) // parts)
    return b"".join(gzip.compress(data[i : i + step]) for i in range(0, len(data), step))


@pytest.fixture
def plain_and_gzip(tmp_path: Path) -> tuple[list[bytes], Path]:
    """Payloads (one empty, one of 12 MiB of random bytes) and the same gzipped, in key order."""
    payloads = [b"", b"x" * 5, os.urandom(12 << 20), b"line\n" * 20_000]
    payloads.append(b"\0" * (3 << 20) + b"tail" * 25)
    data = tmp_path / "gz"
    data.mkdir()
    (data / "0.gz").write_bytes(gzip.compress(payloads[0]))
    (data / "1.gz").write_bytes(gzip.compress(payloads[1]) + b"\0" * 7)  # NUL padding after
    (data / "2.gz").write_bytes(gzip.compress(payloads[2], compresslevel=1))
    (data / "3.gz").write_bytes(_gzip_members(payloads[3], 3))  # three members in a row
    # A member that inflates to more than one step of output, then another in the same bytes.
    (data / "4.gz").write_bytes(_gzip_members(payloads[4], 2))
    return payloads, data


def test_gzip_objects_are_decompressed(
    host: Host, plain_and_gzip: tuple[list[bytes], Path]
) -> None:
    payloads, data = plain_and_gzip
    source = _pipe(host, data.as_uri(), compression="Gzip")
    try:
        assert read_epoch(host.data_dir, "train", 0) == b"".join(payloads)
        assert read_epoch(host.data_dir, "train", 1) == b"".join(payloads)
    finally:
        source.close()


def test_gzip_with_recordio_frames_each_decompressed_object(
    host: Host, plain_and_gzip: tuple[list[bytes], Path]
) -> None:
    payloads, data = plain_and_gzip
    source = _pipe(host, data.as_uri(), compression="Gzip", record_wrapping="RecordIO")
    try:
        assert recordio_records(read_epoch(host.data_dir, "train", 0)) == payloads
    finally:
        source.close()


def test_recordio_frames_each_object(host: Host, tmp_path: Path) -> None:
    data = tmp_path / "objs"
    data.mkdir()
    payloads = [b"", b"a", b"bc", b"def", b"ghij", os.urandom(3 << 20)]
    for i, payload in enumerate(payloads):
        (data / f"{i}").write_bytes(payload)
    source = _pipe(host, data.as_uri(), record_wrapping="RecordIO")
    try:
        stream = read_epoch(host.data_dir, "train", 0)
        assert recordio_records(stream) == payloads
        assert len(stream) % 4 == 0
    finally:
        source.close()


def test_trainops_data_reads_the_wrapped_stream(host: Host, tmp_path: Path) -> None:
    # Whole records, never split: a payload holding the magic at an aligned offset reads back
    # as it was, because a reader takes a record by its length.
    data = tmp_path / "objs"
    data.mkdir()
    payloads = [b"abcd" + RECORDIO_MAGIC.to_bytes(4, "little") + b"tail", os.urandom(70_001)]
    for i, payload in enumerate(payloads):
        (data / f"{i}").write_bytes(payload)
    source = _pipe(host, data.as_uri(), record_wrapping="RecordIO")
    try:
        fd = os.open(host.data_dir / "train_0", os.O_RDONLY)
        with os.fdopen(fd, "rb") as fifo:
            got = list(RecordIOReader(fifo, source="channel train, epoch 0"))
    finally:
        source.close()
    assert got == payloads


def test_an_object_too_large_for_one_record_fails_the_channel(host: Host, tmp_path: Path) -> None:
    data = tmp_path / "huge"
    data.mkdir()
    with (data / "big").open("wb") as handle:
        handle.truncate(1 << 29)  # sparse: one byte more than a record may hold
    source = _pipe(host, data.as_uri(), record_wrapping="RecordIO")
    try:
        assert read_epoch(host.data_dir, "train", 0) == b""
        wait_until(lambda: source.failure is not None)
    finally:
        source.close()
    assert source.failure is not None
    assert f"{(data / 'big').as_uri()}" in source.failure
    assert "RecordIO" in source.failure


def test_a_gzip_bomb_with_recordio_stops_at_one_record(host: Host, tmp_path: Path) -> None:
    # 600 MiB of zeros in under a MiB: framing it whole would spool it all first.
    data = tmp_path / "bomb"
    data.mkdir()
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    with (data / "bomb.gz").open("wb") as out:
        zeros = bytes(16 << 20)
        for _ in range(600 // 16):
            out.write(packer.compress(zeros))
        out.write(packer.flush())
    source = _pipe(host, data.as_uri(), compression="Gzip", record_wrapping="RecordIO")
    try:
        assert read_epoch(host.data_dir, "train", 0, timeout=60) == b""
        wait_until(lambda: source.failure is not None, timeout=60)
    finally:
        source.close()
    assert source.failure is not None
    assert "bomb.gz: a RecordIO part holds at most 536870911 bytes" in source.failure
    assert list((host.root / "algo-1" / "scratch").iterdir()) == []  # the spool is gone


@pytest.mark.parametrize(
    ("broken", "problem"),
    [
        (lambda good: good[:10] + b"\xff" * 50 + good[60:], "not a valid gzip stream"),
        (lambda good: good[: len(good) // 2], "truncated gzip stream"),
        (lambda good: b"plain text, not gzip", "not a valid gzip stream"),
        (lambda good: good + b"trailing garbage", "not a valid gzip stream"),
    ],
    ids=["corrupt", "truncated", "not-gzip", "garbage-after"],
)
def test_a_bad_gzip_object_fails_the_channel_naming_it(
    host: Host, tmp_path: Path, broken: object, problem: str
) -> None:
    data = tmp_path / "bad"
    data.mkdir()
    good = gzip.compress(os.urandom(200_000))
    (data / "a.gz").write_bytes(gzip.compress(b"fine"))
    (data / "b.gz").write_bytes(broken(good))  # type: ignore[operator]
    source = _pipe(host, data.as_uri(), compression="Gzip")
    try:
        got = read_epoch(host.data_dir, "train", 0)  # ends early: EOF, not a hang
        assert got.startswith(b"fine")
        wait_until(lambda: source.failure is not None)
        assert not (host.data_dir / "train_1").exists()  # no further epoch is served
    finally:
        source.close()
    assert source.failure is not None
    assert source.failure.startswith("Pipe channel 'train', epoch 0: ")
    assert (data / "b.gz").as_uri() in source.failure and problem in source.failure
    assert any(line.startswith("ERROR: Pipe channel 'train'") for line in host.lines)


def test_an_object_removed_after_listing_fails_the_channel(host: Host, tmp_path: Path) -> None:
    data = tmp_path / "vanish"
    data.mkdir()
    (data / "a").write_bytes(b"a" * 10)
    (data / "b").write_bytes(b"b" * 10)
    source = _pipe(host, data.as_uri())
    try:
        (data / "b").unlink()
        assert read_epoch(host.data_dir, "train", 0) == b"a" * 10
        wait_until(lambda: source.failure is not None)
    finally:
        source.close()
    assert source.failure is not None and "removed since it was listed" in source.failure


def test_a_link_put_in_place_of_an_object_is_not_followed(host: Host, tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"s" * 10)
    data = tmp_path / "swap"
    data.mkdir()
    (data / "a").write_bytes(b"a" * 10)
    source = _pipe(host, data.as_uri())
    try:
        (data / "a").unlink()
        (data / "a").symlink_to(tmp_path / "secret")
        assert read_epoch(host.data_dir, "train", 0) == b""
        wait_until(lambda: source.failure is not None)
    finally:
        source.close()
    assert source.failure is not None and "links are not followed" in source.failure


def test_read_ahead_stays_within_its_budget_for_a_slow_reader(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path, transfer=TransferSettings(part_size=5 * MIB, memory=10 * MIB)
    )
    host = Host(tmp_path / "hosts", settings)
    data = tmp_path / "many"
    data.mkdir()
    blob = os.urandom(1 << 20)
    for i in range(40):  # 40 MiB through the read-ahead (gzip makes file:// take that path)
        (data / f"{i:02d}.gz").write_bytes(gzip.compress(blob, compresslevel=0))
    source = _pipe(host, data.as_uri(), compression="Gzip")
    try:
        wait_for_path(host.data_dir / "train_0")
        fd = os.open(host.data_dir / "train_0", os.O_RDONLY)
        total = 0
        while chunk := os.read(fd, 64 << 10):  # a small reader: the writer waits on it
            total += len(chunk)
        os.close(fd)
    finally:
        source.close()
    assert total == 40 << 20
    assert source.read_ahead_budget == 10 * MIB // 4
    assert 0 < source.peak_read_ahead <= source.read_ahead_budget  # objects of ~1 MiB each


def test_zlib_is_what_checks_the_stream(host: Host, tmp_path: Path) -> None:
    # A raw deflate stream (no gzip header) is refused, not passed through.
    data = tmp_path / "raw"
    data.mkdir()
    (data / "a.gz").write_bytes(zlib.compress(b"hello"))
    source = _pipe(host, data.as_uri(), compression="Gzip")
    try:
        read_epoch(host.data_dir, "train", 0)
        wait_until(lambda: source.failure is not None)
    finally:
        source.close()
    assert source.failure is not None and "not a valid gzip stream" in source.failure
