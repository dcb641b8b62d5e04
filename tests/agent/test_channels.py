"""Channel assignment (sharding, shuffling) and downloads with progress lines."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from trainops import StorageError
from trainops._settings import Settings
from trainops.agent import ProgressLine, assign_objects, download_channel
from trainops.protocol import ChannelSpec
from trainops.spec import JobSpec
from trainops.storage import ObjectInfo, Progress, store_for


def _objects(count: int) -> list[ObjectInfo]:
    return [ObjectInfo(uri=f"file:///x/{i:03d}", key=f"{i:03d}", size=i) for i in range(count)]


def _hosts(count: int) -> list[str]:
    return [f"algo-{i}" for i in range(1, count + 1)]


@pytest.mark.parametrize(
    ("objects", "hosts"), list(itertools.product([0, 1, 5, 12, 13], [1, 2, 3, 5]))
)
@pytest.mark.parametrize("seed", [None, 7])
def test_shards_are_disjoint_complete_and_balanced(
    objects: int, hosts: int, seed: int | None
) -> None:
    found = _objects(objects)
    shares = [
        assign_objects(found, _hosts(hosts), host, "ShardedByKey", seed) for host in _hosts(hosts)
    ]
    keys = [info.key for share in shares for info in share]
    assert len(keys) == len(set(keys))
    assert set(keys) == {info.key for info in found}
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1


def test_assignment_is_deterministic_and_independent_of_listing_order() -> None:
    found = _objects(20)
    first = assign_objects(found, _hosts(3), "algo-2", "ShardedByKey", 11)
    again = assign_objects(
        list(reversed(found)), list(reversed(_hosts(3))), "algo-2", "ShardedByKey", 11
    )
    assert first == again


def test_seed_changes_order_and_assignment() -> None:
    found = _objects(30)
    plain = assign_objects(found, _hosts(1), "algo-1", "FullyReplicated", None)
    seeded = assign_objects(found, _hosts(1), "algo-1", "FullyReplicated", 1)
    other = assign_objects(found, _hosts(1), "algo-1", "FullyReplicated", 2)
    assert [i.key for i in plain] == sorted(i.key for i in found)
    assert sorted(seeded, key=lambda i: i.key) == plain
    assert seeded != plain and seeded != other
    share_1 = assign_objects(found, _hosts(2), "algo-1", "ShardedByKey", 1)
    share_2 = assign_objects(found, _hosts(2), "algo-1", "ShardedByKey", 2)
    assert share_1 != share_2


def test_fully_replicated_gives_every_host_everything() -> None:
    found = _objects(7)
    for host in _hosts(3):
        assert len(assign_objects(found, _hosts(3), host, "FullyReplicated", None)) == 7


def test_progress_lines_are_throttled_with_a_final_line() -> None:
    now = [0.0]
    lines: list[str] = []
    line = ProgressLine("Downloading channel 'train'", lines.append, clock=lambda: now[0])
    progress = Progress(total_objects=40, total_bytes=10_000_000)
    for done in range(1, 41):
        now[0] += 0.25
        progress.done_objects, progress.done_bytes = done, done * 250_000
        line(progress)
    assert len(lines) == 11  # t = 0.25, 1.25, ..., 9.25 and the final one at t = 10
    assert lines[1] == "Downloading channel 'train': 5/40 objects, 1.2/10.0 MB"
    assert lines[-1] == "Downloading channel 'train': 40/40 objects, 10.0/10.0 MB"


def test_download_channel_fetches_the_share(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for i in range(6):
        (data / "sub").mkdir(parents=True, exist_ok=True)
        (data / "sub" / f"part-{i}.csv").write_text(f"row {i}\n")
    store = store_for(data.as_uri(), Settings(home=tmp_path))
    channel = _channel(data.as_uri(), distribution="ShardedByKey")
    lines: list[str] = []
    dest = tmp_path / "dest"
    progress = download_channel(
        store, channel, dest, hosts=_hosts(2), current_host="algo-2", log=lines.append
    )
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert got == ["sub/part-1.csv", "sub/part-3.csv", "sub/part-5.csv"]
    assert progress.done_objects == 3
    assert lines[-1].startswith("Downloading channel 'train': 3/3 objects")


def test_an_empty_channel_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    store = store_for((tmp_path / "empty").as_uri(), Settings(home=tmp_path))
    channel = _channel((tmp_path / "empty").as_uri())
    with pytest.raises(StorageError, match="channel 'train': no objects"):
        download_channel(
            store, channel, tmp_path / "d", hosts=["algo-1"], current_host="algo-1", log=print
        )


def _channel(uri: str, **fields: str) -> ChannelSpec:
    """The channel ``train`` as a validated spec gives it to the agent."""
    return (
        JobSpec(entry_point="train.py", inputs={"train": {"uri": uri, **fields}}).view().inputs[0]
    )
