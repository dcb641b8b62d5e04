"""StreamingDataset straight from object storage: a real SeaweedFS S3 server on loopback."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
import torch.utils.data

from tests._support.seaweed import SeaweedS3
from tests.data._streams import ids, make_dataset
from trainops._errors import StorageError
from trainops._settings import Settings
from trainops.data import CorruptRecordError, StreamingDataset
from trainops.storage import store_for

pytestmark = [pytest.mark.s3, pytest.mark.slow]

COUNTS = [40, 25, 0, 33, 52, 18]
TOTAL = sum(COUNTS)


@pytest.fixture
def remote(
    tmp_path: Path, s3_server: SeaweedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Path]:
    """The same dataset in a folder and under an s3:// prefix; the dataset's env reaches it."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    local = tmp_path / "ds"
    make_dataset(local, COUNTS)
    uri = f"s3://{s3_bucket}/datasets/ds"
    store = store_for(uri, Settings.load())
    for path in sorted(local.iterdir()):
        store.upload(path, f"{uri}/{path.name}")
    return uri, local


def _cached(folder: Path) -> dict[str, int]:
    """The shards in a cache folder by their names in the index, and their sizes."""
    sizes = {}
    for path in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):  # trimmed by the fetch thread meanwhile
            if not path.name.startswith("."):
                sizes[path.name.rsplit(".", 1)[0]] = path.stat().st_size
    return sizes


def test_records_from_the_bucket_are_those_of_the_folder(
    remote: tuple[str, Path], tmp_path: Path
) -> None:
    uri, local = remote
    options = {"batch_size": 9, "seed": 3, "shuffle_window": 30}
    streamed = StreamingDataset(uri, cache_dir=tmp_path / "cache", **options)  # type: ignore[arg-type]
    in_place = StreamingDataset(local, **options)  # type: ignore[arg-type]
    for _ in range(2):
        assert ids(streamed) == ids(in_place)
    # Every shard with records was fetched once; the empty one is never needed.
    assert sorted(_cached(tmp_path / "cache")) == [
        f"part-{k:05d}.tops" for k, count in enumerate(COUNTS) if count
    ]


def test_the_cache_stays_within_its_limit(remote: tuple[str, Path], tmp_path: Path) -> None:
    uri, local = remote
    largest = max(p.stat().st_size for p in local.glob("*.tops"))
    cache = tmp_path / "cache"
    dataset = StreamingDataset(
        uri, cache_dir=cache, cache_limit=2 * largest, prefetch=1, shuffle_window=16
    )
    peak = 0
    for _ in dataset:
        peak = max(peak, sum(_cached(cache).values()))
    # Past the limit only for a moment: a shard just fetched (by the loop or the one fetch
    # thread) until it trims, and the shards it spares (the one fetched, the one pending).
    assert 0 < peak <= 2 * largest + 3 * largest
    assert sum(_cached(cache).values()) <= 2 * largest + largest
    assert not [p for p in cache.iterdir() if p.name.endswith(".fetch")]


def test_workers_share_the_cache_and_see_the_same_sequence(
    remote: tuple[str, Path], tmp_path: Path
) -> None:
    uri, _ = remote
    options = {"batch_size": 6, "seed": 5, "shuffle_window": 25, "cache_dir": tmp_path / "c"}
    alone = ids(StreamingDataset(uri, **options))  # type: ignore[arg-type]
    dataset = StreamingDataset(uri, **options)  # type: ignore[arg-type]
    as_torch: torch.utils.data.IterableDataset[object] = dataset  # type: ignore[assignment]
    loader = torch.utils.data.DataLoader(
        as_torch, batch_size=None, num_workers=2, collate_fn=lambda b: b
    )
    assert ids(loader) == alone


def test_a_shard_changed_in_the_bucket_is_refused_and_not_cached(
    remote: tuple[str, Path], tmp_path: Path
) -> None:
    uri, local = remote
    data = bytearray((local / "part-00003.tops").read_bytes())
    data[-1] ^= 0xFF  # the same size, a valid layout, another sha256
    store_for(uri, Settings.load()).put_bytes(f"{uri}/part-00003.tops", bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(CorruptRecordError, match=rf"{uri}/part-00003.tops: .*sha256 is"):
        list(StreamingDataset(uri, cache_dir=cache, shuffle=False))
    assert "part-00003.tops" not in _cached(cache)


def test_a_prefix_without_an_index_is_a_storage_error(
    s3_server: SeaweedS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StorageError, match=r"index\.json: no such object"):
        StreamingDataset(f"s3://{s3_bucket}/nothing-here")


def test_a_cache_folder_that_is_a_link_is_refused(remote: tuple[str, Path], tmp_path: Path) -> None:
    uri, _ = remote
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "cache")
    with pytest.raises(CorruptRecordError, match="cache folder is a link"):
        list(StreamingDataset(uri, cache_dir=tmp_path / "cache"))


def test_a_dataset_packed_again_under_the_same_names_is_read_anew(
    remote: tuple[str, Path], tmp_path: Path
) -> None:
    """The cache knows a shard by its content: shards re-packed at the same URI (or another
    dataset's in a shared cache_dir) with the same names and sizes are never taken for it."""
    uri, local = remote
    cache = tmp_path / "cache"
    before = ids(StreamingDataset(uri, cache_dir=cache, shuffle=False))
    again = tmp_path / "again"
    make_dataset(again, COUNTS, first=13 * 100_000)
    store = store_for(uri, Settings.load())
    for path in sorted(again.iterdir()):
        assert path.stat().st_size == (local / path.name).stat().st_size
        store.upload(path, f"{uri}/{path.name}")
    after = ids(StreamingDataset(uri, cache_dir=cache, shuffle=False))
    assert after == [g + 13 * 100_000 for g in before]
