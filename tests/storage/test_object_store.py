"""The ObjectStore contract, run against every registered store (see conftest.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.storage.conftest import StoreCase
from trainops import StorageError
from trainops._settings import Settings
from trainops.storage import ObjectInfo, store_for

TREE = {
    "a/one.txt": b"1",
    "a/b/two.bin": b"22",
    "a/b/c/three.txt": b"333",
    "a/zero": b"",
    "ab/sibling.txt": b"not under a/",
}


def _put_tree(case: StoreCase) -> None:
    for key, data in TREE.items():
        case.store.put_bytes(case.uri(key), data)


def _no_part_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.endswith(".part")]


# list_objects


@pytest.mark.parametrize("prefix", ["a", "a/"])
def test_list_is_recursive_sorted_and_relative(case: StoreCase, prefix: str) -> None:
    _put_tree(case)
    found = case.store.list_objects(case.uri(prefix))
    assert [o.key for o in found] == ["b/c/three.txt", "b/two.bin", "one.txt", "zero"]
    assert [o.size for o in found] == [3, 2, 1, 0]
    for info in found:
        assert case.store.get_bytes(info.uri) == TREE[f"a/{info.key}"]


def test_list_of_a_single_object_names_it_by_base_name(case: StoreCase) -> None:
    _put_tree(case)
    uri = case.uri("a/b/two.bin")
    assert case.store.list_objects(uri) == [ObjectInfo(uri=uri, key="two.bin", size=2)]


def test_list_of_a_missing_prefix_is_empty(case: StoreCase) -> None:
    _put_tree(case)
    assert case.store.list_objects(case.uri("nothing-here")) == []
    assert case.store.list_objects(case.uri("a/b/c/three")) == []  # a partial name is no prefix


def test_list_after_deleting_everything_is_empty(case: StoreCase) -> None:
    case.store.put_bytes(case.uri("gone/x"), b"x")
    case.store.delete(case.uri("gone/x"))
    assert case.store.list_objects(case.uri("gone")) == []


def test_list_of_the_root_sees_every_object(case: StoreCase) -> None:
    _put_tree(case)
    assert [o.key for o in case.store.list_objects(case.root)] == sorted(TREE)


# bytes, exists, delete


def test_put_and_get_bytes_round_trip_and_overwrite(case: StoreCase) -> None:
    uri = case.uri("x/y.bin")
    case.store.put_bytes(uri, bytes(range(256)) * 10)
    assert case.store.get_bytes(uri) == bytes(range(256)) * 10
    case.store.put_bytes(uri, b"second")
    assert case.store.get_bytes(uri) == b"second"
    case.store.put_bytes(uri, b"")
    assert case.store.get_bytes(uri) == b""


def test_get_of_a_missing_object_is_a_storage_error(case: StoreCase) -> None:
    with pytest.raises(StorageError, match="no such object"):
        case.store.get_bytes(case.uri("missing.bin"))


def test_exists_is_true_for_objects_only(case: StoreCase) -> None:
    _put_tree(case)
    assert case.store.exists(case.uri("a/one.txt"))
    assert case.store.exists(case.uri("a/zero"))
    assert not case.store.exists(case.uri("a/missing.txt"))
    assert not case.store.exists(case.uri("a/b"))  # a prefix is not an object


def test_delete_removes_the_object_and_a_missing_one_is_fine(case: StoreCase) -> None:
    _put_tree(case)
    case.store.delete(case.uri("a/one.txt"))
    assert not case.store.exists(case.uri("a/one.txt"))
    case.store.delete(case.uri("a/one.txt"))
    case.store.delete(case.uri("never/was.txt"))
    assert [o.key for o in case.store.list_objects(case.uri("a"))] == [
        "b/c/three.txt",
        "b/two.bin",
        "zero",
    ]


# download


def test_download_creates_parents_and_replaces_the_target(case: StoreCase, tmp_path: Path) -> None:
    case.store.put_bytes(case.uri("m.bin"), b"model")
    dest = tmp_path / "deep" / "er" / "m.bin"
    case.store.download(case.uri("m.bin"), dest, expected_size=5)
    assert dest.read_bytes() == b"model"
    case.store.put_bytes(case.uri("m.bin"), b"model v2")
    case.store.download(case.uri("m.bin"), dest)
    assert dest.read_bytes() == b"model v2"
    assert _no_part_files(tmp_path)


def test_download_of_a_missing_object_leaves_nothing(case: StoreCase, tmp_path: Path) -> None:
    dest = tmp_path / "out" / "missing.bin"
    with pytest.raises(StorageError, match=r"missing\.bin"):
        case.store.download(case.uri("missing.bin"), dest)
    assert not dest.exists()
    assert _no_part_files(tmp_path)


def test_download_with_the_wrong_size_keeps_the_old_file(case: StoreCase, tmp_path: Path) -> None:
    case.store.put_bytes(case.uri("data.bin"), b"12345")
    dest = tmp_path / "data.bin"
    dest.write_bytes(b"previous")
    with pytest.raises(StorageError, match="expected 6"):
        case.store.download(case.uri("data.bin"), dest, expected_size=6)
    assert dest.read_bytes() == b"previous"
    assert _no_part_files(tmp_path)


# upload


def test_upload_makes_the_file_visible_whole(case: StoreCase, tmp_path: Path) -> None:
    src = tmp_path / "weights.bin"
    src.write_bytes(b"w" * 300_000)
    case.store.upload(src, case.uri("model/weights.bin"))
    assert case.store.list_objects(case.uri("model")) == [
        ObjectInfo(uri=case.uri("model/weights.bin"), key="weights.bin", size=300_000)
    ]
    assert case.store.get_bytes(case.uri("model/weights.bin")) == b"w" * 300_000


def test_upload_reports_every_byte(case: StoreCase, tmp_path: Path) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(b"b" * 3_000_000)
    heard: list[int] = []
    case.store.upload(src, case.uri("big.bin"), on_bytes=heard.append)
    assert sum(heard) == 3_000_000
    assert all(n > 0 for n in heard)


def test_upload_of_a_missing_or_non_file_source_fails(case: StoreCase, tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="not a file"):
        case.store.upload(tmp_path / "absent", case.uri("x"))
    with pytest.raises(StorageError, match="not a file"):
        case.store.upload(tmp_path, case.uri("x"))
    assert not case.store.exists(case.uri("x"))


def test_readers_never_see_a_torn_object(case: StoreCase, tmp_path: Path) -> None:
    """While one thread overwrites an object, every read returns one version, whole."""
    size, uri = 200_000, case.uri("ckpt/state.bin")
    versions = []
    for char in b"abcdef":
        path = tmp_path / f"v{chr(char)}"
        path.write_bytes(bytes([char]) * size)
        versions.append(path)
    case.store.upload(versions[0], uri)
    done = threading.Event()

    def overwrite() -> None:
        for _round in range(3):
            for path in versions:
                case.store.upload(path, uri)
        done.set()

    writer = threading.Thread(target=overwrite)
    writer.start()
    seen = []
    while not done.is_set():
        seen.append(case.store.get_bytes(uri))
    writer.join()
    assert seen
    for data in seen:
        assert len(data) == size and data == data[:1] * size
    assert [o.key for o in case.store.list_objects(case.uri("ckpt"))] == ["state.bin"]


# URIs


def test_a_store_refuses_other_schemes_and_empty_paths(case: StoreCase) -> None:
    other = "file:///tmp/x" if case.scheme != "file" else "s3://bucket/x"
    with pytest.raises(StorageError, match="handles"):
        case.store.get_bytes(other)
    with pytest.raises(StorageError, match="empty path"):
        case.store.list_objects(f"{case.scheme}://")
    with pytest.raises(StorageError, match="not a URI"):
        case.store.exists("relative/path")


def test_unknown_scheme_names_the_known_ones(trainops_home: Path) -> None:
    settings = Settings(home=trainops_home)
    with pytest.raises(StorageError, match=r"unsupported scheme.*file://.*s3://"):
        store_for("gs://bucket/key", settings)
    with pytest.raises(StorageError, match="not a URI"):
        store_for("bucket/key", settings)
