"""The shard-source contract, for every scheme registered in ``SHARD_SOURCES``.

Parametrized over ``SHARD_SOURCES.names()``: a scheme registered there runs through every test
here and fails until it has a :data:`CASES` entry (how to put a folder's dataset at a URI of
that scheme). Every source: the same records as the folder for the same seed, epoch after
epoch; a shard changed after packing is refused naming it; a location of a scheme that is not
registered is refused naming the known ones.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.data._streams import ids, make_dataset
from trainops._settings import Settings
from trainops.data import CorruptRecordError, StreamingDataset
from trainops.data.streaming._dataset import SHARD_SOURCES
from trainops.storage import store_for

COUNTS = [30, 0, 21, 17]


def _file(request: pytest.FixtureRequest, local: Path) -> str:
    copy = request.getfixturevalue("tmp_path") / "elsewhere"
    shutil.copytree(local, copy)
    return copy.as_uri()


def _s3(request: pytest.FixtureRequest, local: Path) -> str:
    server = request.getfixturevalue("s3_server")
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    uri = f"s3://{request.getfixturevalue('s3_bucket')}/shards"
    store = store_for(uri, Settings.load())
    for path in sorted(local.iterdir()):
        store.upload(path, f"{uri}/{path.name}")
    return uri


#: scheme -> puts the dataset in ``local`` at a URI of that scheme (a copy: the folder stays).
CASES: dict[str, Callable[[pytest.FixtureRequest, Path], str]] = {"file": _file, "s3": _s3}
MARKS = {"s3": [pytest.mark.s3, pytest.mark.slow]}


Place = Callable[[Path], str]


@pytest.fixture(
    params=[pytest.param(s, marks=MARKS.get(s, []), id=s) for s in SHARD_SOURCES.names()]
)
def place(request: pytest.FixtureRequest) -> Place:
    """Puts a folder's dataset at a URI of the scheme under test and returns the URI."""
    scheme: str = request.param
    if scheme not in CASES:
        pytest.fail(f"no conformance case for {scheme}:// shard sources: add one to {__file__}")
    return lambda local: CASES[scheme](request, local)


def test_the_records_are_those_of_the_folder(place: Place, tmp_path: Path) -> None:
    local = tmp_path / "ds"
    make_dataset(local, COUNTS)
    uri = place(local)
    options = {"batch_size": 7, "seed": 5, "shuffle_window": 20}
    sourced = StreamingDataset(uri, cache_dir=tmp_path / "cache", **options)  # type: ignore[arg-type]
    in_place = StreamingDataset(local, **options)  # type: ignore[arg-type]
    for _ in range(2):
        assert ids(sourced) == ids(in_place)


def test_a_shard_changed_after_packing_is_refused_by_name(place: Place, tmp_path: Path) -> None:
    local = tmp_path / "ds"
    make_dataset(local, COUNTS)
    shard = local / "part-00002.tops"
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF
    shard.write_bytes(bytes(data))
    uri = place(local)
    dataset = StreamingDataset(uri, cache_dir=tmp_path / "cache", verify=True)
    with pytest.raises(CorruptRecordError, match=r"part-00002\.tops"):
        list(dataset)


def test_a_scheme_that_is_not_registered_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"^'gs://b/ds': unknown shard source scheme 'gs' \(known: file, s3\)$"
    ):
        StreamingDataset("gs://b/ds")
