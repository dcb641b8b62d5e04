"""Batches from DataLoader workers through the shared-memory ring: in place, reused, never lost."""

from __future__ import annotations

import gc
import os
from array import array
from pathlib import Path

import pytest

from trainops.data import ShardIndex, StreamingDataset, write_shard
from trainops.data.streaming._shm_ring import Ring, receive

RECORD = 64 << 10
COUNT = 600  # 37.5 MiB: more than twice a worker's smallest ring (16 MiB)


def _record(g: int) -> bytes:
    return g.to_bytes(8, "little") + bytes([g % 251]) * (RECORD - 8)


def _intact(record: memoryview | bytes) -> int:
    g = int.from_bytes(record[:8], "little")
    assert len(record) == RECORD and record[8] == record[-1] == g % 251
    return g


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    infos = [
        write_shard(root / f"part-{k}.tops", [_record(g) for g in range(lo, lo + 100)])
        for k, lo in enumerate(range(0, COUNT, 100))
    ]
    (root / "index.json").write_text(ShardIndex(tuple(infos)).to_json())
    return root


def _loader(folder: Path, workers: int = 2) -> object:
    return StreamingDataset(folder, batch_size=16, seed=3).loader(num_workers=workers)


@pytest.mark.slow
def test_batches_are_read_in_place_and_the_ring_is_reused(folder: Path) -> None:
    seen, kinds = [], set()
    for batch in _loader(folder):  # type: ignore[attr-defined]
        kinds.add(type(batch[0].obj).__name__)
        seen += [_intact(record) for record in batch]
    assert sorted(seen) == list(range(COUNT))
    # Every batch came through shared memory although the data is twice the rings' size.
    assert {kind.startswith("c_char_Array_") for kind in kinds} == {True}


@pytest.mark.slow
def test_a_loop_that_keeps_every_batch_still_gets_all_of_them_right(folder: Path) -> None:
    batches = list(_loader(folder, workers=1))  # type: ignore[call-overload]
    assert sorted(_intact(r) for batch in batches for r in batch) == list(range(COUNT))
    kinds = {type(batch[0].obj).__name__.startswith("c_char_Array_") for batch in batches}
    assert kinds == {True, False}  # the ring filled up: later batches came pickled as bytes


@pytest.mark.slow
def test_a_record_kept_after_its_batch_is_gone_keeps_its_bytes(folder: Path) -> None:
    kept = None
    for batch in _loader(folder, workers=1):  # type: ignore[attr-defined]
        if kept is None:
            kept = batch[3]  # the batch is dropped; its span must not be reused under this view
            expected = bytes(kept)
        # The young generations: a batch dropped in a cycle is in them (a full collection
        # each batch walks everything torch made, about 100 ms a time on this machine).
        gc.collect(1)
    assert kept is not None and bytes(kept) == expected


def test_records_cannot_be_written_to() -> None:
    ring = Ring(16 << 20)
    records = [memoryview(_record(1)), memoryview(_record(2))]
    span = ring.write(records, 2 * RECORD)
    assert span is not None
    bounds = array("Q", [0, RECORD, 2 * RECORD]).tobytes()
    got = receive((os.getpid(), ring.fd, ring.token, ring.capacity), span, bounds)
    assert [_intact(r) for r in got] == [1, 2]
    with pytest.raises(TypeError):
        got[0][8] = 0


def test_a_full_ring_says_so_and_is_free_again_once_batches_are_gone() -> None:
    ring = Ring(16 << 20)
    where = (os.getpid(), ring.fd, ring.token, ring.capacity)
    chunk = [memoryview(bytes(4 << 20))]  # a quarter of the ring: the largest batch it takes
    bounds = array("Q", [0, 4 << 20]).tobytes()
    held = []
    for _ in range(4):
        span = ring.write(chunk, 4 << 20)
        assert span is not None
        held.append(receive(where, span, bounds))
    assert ring.write(chunk, 4 << 20) is None  # full: the caller pickles the batch instead
    assert ring.write([memoryview(bytes((4 << 20) + 1))], (4 << 20) + 1) is None  # too large
    held.pop(0)
    gc.collect()
    assert ring.write(chunk, 4 << 20) is not None  # the first span is free again


@pytest.mark.slow
def test_the_ring_can_be_turned_off(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOPS_DATA_SHM", "0")
    kinds = {type(batch[0].obj).__name__ for batch in _loader(folder, workers=1)}  # type: ignore[attr-defined]
    assert kinds == {"bytes"}


def test_a_ring_that_cannot_be_opened_says_what_to_do() -> None:
    ring = Ring(16 << 20)
    span = ring.write([memoryview(b"abcd")], 4)
    assert span is not None
    bounds = array("Q", [0, 4]).tobytes()
    with pytest.raises(RuntimeError, match="TRAINOPS_DATA_SHM=0"):
        receive((os.getpid(), 10_000, ring.token, ring.capacity), span, bounds)  # no such fd
