"""StreamingDataset over a local folder: every record once, deterministic shuffles, batches."""

from __future__ import annotations

import itertools
import pickle
from collections import Counter
from pathlib import Path

import pytest

from tests.data._streams import ids, make_dataset
from trainops.data import RecordBatch, StreamingDataset
from trainops.data.streaming._shuffle import Windows, default_window, permutation

COUNTS = [40, 0, 25, 60, 7, 33, 50]  # an empty shard and uneven sizes on purpose
TOTAL = sum(COUNTS)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    make_dataset(tmp_path / "ds", COUNTS)
    return tmp_path / "ds"


def test_an_epoch_yields_every_record_once(folder: Path) -> None:
    seen = ids(StreamingDataset(folder, batch_size=16, shuffle_window=32))
    assert sorted(seen) == list(range(TOTAL))


def test_without_shuffle_records_come_in_index_order(folder: Path) -> None:
    dataset = StreamingDataset(folder, shuffle=False)
    assert ids(dataset) == list(range(TOTAL))
    assert ids(dataset) == list(range(TOTAL))  # the next epoch too


def test_the_order_is_fixed_by_seed_and_epoch(folder: Path) -> None:
    def order(seed: int, epoch: int) -> list[int]:
        dataset = StreamingDataset(folder, batch_size=10, seed=seed, shuffle_window=20)
        dataset.set_epoch(epoch)
        return ids(dataset)

    assert order(7, 0) == order(7, 0)
    assert order(7, 1) == order(7, 1)
    assert order(7, 0) != order(7, 1)
    assert order(7, 0) != order(8, 0)


def test_iterating_again_is_the_next_epoch(folder: Path) -> None:
    dataset = StreamingDataset(folder, batch_size=8, seed=1)
    first, second = ids(dataset), ids(dataset)
    assert dataset.epoch == 2
    again = StreamingDataset(folder, batch_size=8, seed=1)
    again.set_epoch(1)
    assert first != second and ids(again) == second


def test_shuffle_mixes_records_of_different_shards_within_a_window(folder: Path) -> None:
    seen = ids(StreamingDataset(folder, seed=3, shuffle_window=64))
    # Every window of 64 output positions holds a permutation of 64 consecutive positions of
    # the shard-shuffled sequence: its records come from several shards, not one run.
    shard_of = [k for k, n in enumerate(COUNTS) for _ in range(n)]
    assert max(len({shard_of[g] for g in seen[i : i + 64]}) for i in range(0, TOTAL, 64)) > 1
    assert seen != sorted(seen)


def test_a_window_is_a_permutation_of_its_positions() -> None:
    windows = Windows(10, ("seed", 0), shuffle=True)
    shown = [windows.source(q, 25) for q in range(25)]
    assert sorted(shown[:10]) == list(range(10))
    assert sorted(shown[20:]) == list(range(20, 25))  # the short last window
    assert sorted(shown) == list(range(25))
    assert permutation(1000, 1, 2) == permutation(1000, 1, 2) != permutation(1000, 1, 3)


def test_permutations_do_not_change_across_python_releases() -> None:
    # Drawn only with Random.random(), whose sequence Python guarantees for a given seed: a
    # change here would reorder every saved run's data.
    assert permutation(10, 7, 0, "shards") == [0, 9, 4, 5, 1, 7, 6, 2, 3, 8]


def test_batches_hold_the_records_and_say_where_they_end(folder: Path) -> None:
    batches = list(StreamingDataset(folder, batch_size=50, shuffle=False))
    assert [len(b) for b in batches] == [50, 50, 50, 50, 15]
    assert all(isinstance(b, RecordBatch) for b in batches)
    assert [b.stop for b in batches] == [50, 100, 150, 200, 215]
    assert {b.epoch for b in batches} == {0}
    clone = pickle.loads(pickle.dumps(batches[1]))
    assert clone == batches[1] and (clone.epoch, clone.stop) == (0, 100)
    assert type(clone) is RecordBatch and all(type(r) is memoryview for r in clone)


def test_without_a_batch_size_records_come_one_by_one_as_bytes(folder: Path) -> None:
    items = list(StreamingDataset(folder, shuffle=False))
    assert all(type(item) is bytes for item in items)
    assert len(items) == TOTAL


def test_len_counts_batches_or_records_of_an_epoch(folder: Path) -> None:
    assert len(StreamingDataset(folder, batch_size=50)) == 5
    assert len(StreamingDataset(folder)) == TOTAL


def test_windows_larger_than_the_dataset_shuffle_it_whole(folder: Path) -> None:
    seen = ids(StreamingDataset(folder, seed=5, shuffle_window=1 << 20))
    assert sorted(seen) == list(range(TOTAL))
    assert Counter(g // 100 for g in seen[:50]) != Counter({0: 50})


def test_an_empty_dataset_yields_nothing(tmp_path: Path) -> None:
    make_dataset(tmp_path / "empty", [0, 0])
    dataset = StreamingDataset(tmp_path / "empty", batch_size=4)
    assert list(dataset) == [] and len(dataset) == 0


def test_bad_options_are_refused_with_their_name(folder: Path) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        StreamingDataset(folder, batch_size=0)
    with pytest.raises(ValueError, match="shuffle_window"):
        StreamingDataset(folder, shuffle_window=0)


def test_a_file_uri_reads_the_folder_in_place(folder: Path) -> None:
    assert ids(StreamingDataset(f"file://{folder}", shuffle=False)) == list(range(TOTAL))


def test_the_default_window_holds_a_gibibyte_of_records_at_most_262144() -> None:
    assert default_window(4096, 1 << 30) == 1 << 18
    assert default_window(100 << 10, 1 << 30) == 10485
    assert default_window(2 << 30, 1 << 30) == 1


def test_by_default_a_small_dataset_is_shuffled_as_one_window(folder: Path) -> None:
    # The documented order, spelled out: shards permuted by (seed, epoch), their records
    # concatenated, then one window of 262,144 positions (more than the dataset) permuted.
    order = permutation(len(COUNTS), 3, 0, "shards")
    starts = list(itertools.accumulate(COUNTS, initial=0))
    sequence = [g for k in order for g in range(starts[k], starts[k + 1])]
    windows = Windows(1 << 18, (3, 0, 0, "records"), shuffle=True)
    expected = [sequence[windows.source(q, TOTAL)] for q in range(TOTAL)]
    assert ids(StreamingDataset(folder, seed=3)) == expected
    assert StreamingDataset(folder).state_dict()["shuffle_window"] is None
