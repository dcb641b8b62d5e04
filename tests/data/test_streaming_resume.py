"""StreamingDataset resumed mid-epoch from its state dict continues exactly where it stopped."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.data._streams import ids, make_dataset
from trainops.data import StreamingDataset

COUNTS = [30, 12, 45, 0, 27, 36]
TOTAL = sum(COUNTS)
OPTIONS: dict[str, Any] = {"batch_size": 7, "seed": 9, "shuffle_window": 40}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    make_dataset(tmp_path / "ds", COUNTS)
    return tmp_path / "ds"


def _uninterrupted(folder: Path, epochs: int) -> list[list[int]]:
    dataset = StreamingDataset(folder, **OPTIONS)
    return [ids(dataset) for _ in range(epochs)]


def test_resuming_mid_epoch_continues_the_same_sequence(folder: Path) -> None:
    expected = _uninterrupted(folder, 3)
    first = StreamingDataset(folder, **OPTIONS)
    ids(first)  # epoch 0
    taken = ids(itertools.islice(iter(first), 5))  # 5 batches of epoch 1, then the job dies
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint would keep it
    assert state["epoch"] == 1 and state["consumed"] == 35

    resumed = StreamingDataset(folder, **{**OPTIONS, "seed": 0})  # the seed comes from the state
    resumed.load_state_dict(state)
    assert taken + ids(resumed) == expected[1]
    assert ids(resumed) == expected[2]


def test_state_is_a_few_small_fields(folder: Path) -> None:
    state = StreamingDataset(folder, **OPTIONS).state_dict()
    assert set(state) == {
        "version", "epoch", "consumed", "seed", "dataset", "world_size", "shuffle",
        "shuffle_window", "drop_last",
    }  # fmt: skip
    assert len(json.dumps(state)) < 300


@pytest.mark.slow
def test_a_loader_with_workers_tracks_what_the_loop_took(folder: Path) -> None:
    expected = _uninterrupted(folder, 2)
    first = StreamingDataset(folder, **OPTIONS)
    loader = first.loader(num_workers=2, prefetch_factor=4)
    taken = ids(itertools.islice(iter(loader), 6))
    # Workers have read ahead of the loop; the state counts only the batches the loop took.
    assert first.state_dict()["consumed"] == 42

    resumed = StreamingDataset(folder, **OPTIONS)
    resumed.load_state_dict(first.state_dict())
    rest = ids(resumed.loader(num_workers=1))  # another worker count: the same sequence
    assert taken + rest == expected[0]
    assert resumed.epoch == 1
    assert ids(resumed.loader(num_workers=2)) == expected[1]


def test_records_one_by_one_resume_at_any_record(folder: Path) -> None:
    options = {**OPTIONS, "batch_size": None}
    expected = ids(StreamingDataset(folder, **options))
    first = StreamingDataset(folder, **options)
    taken = ids(itertools.islice(iter(first), 23))
    resumed = StreamingDataset(folder, **options)
    resumed.load_state_dict(first.state_dict())
    assert taken + ids(resumed) == expected


def test_resuming_reads_nothing_before_the_position(folder: Path) -> None:
    options = {**OPTIONS, "shuffle": False, "shuffle_window": 8}
    first = StreamingDataset(folder, **options)
    state = {**first.state_dict(), "consumed": 90}  # past shards 0 and 1 (42 records)
    (folder / "part-00000.tops").unlink()
    (folder / "part-00001.tops").unlink()
    resumed = StreamingDataset(folder, **options)
    resumed.load_state_dict(state)
    assert ids(resumed) == list(range(90, TOTAL))


def test_a_position_at_the_end_resumes_into_the_next_epoch(folder: Path) -> None:
    dataset = StreamingDataset(folder, **OPTIONS)
    dataset.load_state_dict({**dataset.state_dict(), "consumed": TOTAL})
    assert ids(dataset) == []
    assert ids(dataset) == _uninterrupted(folder, 2)[1]


def _bad(state: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**state, **changes}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"version": 2}, "state version 2"),
        ({"consumed": -1}, "'consumed'"),
        ({"epoch": "3"}, "'epoch'"),
        ({"seed": True}, "'seed'"),
        ({"dataset": "0123456789abcdef"}, "'dataset'.*other records"),
        ({"world_size": 4}, "'world_size' is 4, this dataset has 1"),
        ({"shuffle_window": 41}, "'shuffle_window'"),
    ],
)
def test_a_state_for_other_data_or_layout_is_refused_by_field(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    dataset = StreamingDataset(folder, **OPTIONS)
    with pytest.raises(ValueError, match=message):
        dataset.load_state_dict(_bad(dataset.state_dict(), **changes))


def test_a_state_that_is_not_a_dict_is_refused(folder: Path) -> None:
    with pytest.raises(ValueError, match="is a dict, not list"):
        StreamingDataset(folder).load_state_dict([1, 2])  # type: ignore[arg-type]


def test_other_shards_give_another_fingerprint(folder: Path, tmp_path: Path) -> None:
    make_dataset(tmp_path / "other", [30, 12, 45, 0, 27, 35])
    mine = StreamingDataset(folder).state_dict()
    other = StreamingDataset(tmp_path / "other")
    with pytest.raises(ValueError, match="'dataset'"):
        other.load_state_dict(mine)
