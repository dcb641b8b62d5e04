"""The ObjectStore contract, run against every registered store (see conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tests.storage.conftest import StoreCase
from trainops import StorageError
from trainops._settings import MIB, Settings, TransferSettings
from trainops.storage import ObjectInfo, ObjectStore, store_for

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


def test_list_after_a_key_gives_only_the_later_keys(case: StoreCase) -> None:
    _put_tree(case)
    found = case.store.list_objects(case.uri("a"), start_after="b/two.bin")
    assert [o.key for o in found] == ["one.txt", "zero"]
    found = case.store.list_objects(case.uri("a/"), start_after="b/c/three.txt")
    assert [o.key for o in found] == ["b/two.bin", "one.txt", "zero"]
    assert case.store.list_objects(case.uri("a"), start_after="zero") == []
    assert case.store.list_objects(case.uri("nothing-here"), start_after="x") == []


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


def test_a_file_prefix_lists_no_links(tmp_path: Path) -> None:
    # A link is not an object: listing it would let a channel read through it out of the prefix.
    (tmp_path / "secret").write_text("outside")
    prefix = tmp_path / "objects"
    prefix.mkdir()
    (prefix / "real").write_text("inside")
    (prefix / "link").symlink_to(tmp_path / "secret")
    (prefix / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    found = store_for(prefix.as_uri(), Settings(home=tmp_path)).list_objects(prefix.as_uri())
    assert [o.key for o in found] == ["real"]


def test_a_link_swapped_in_after_the_listing_is_never_read_through(tmp_path: Path) -> None:
    # A hostile writer under the prefix lists a harmless file, then swaps it for a link to a
    # secret (or a FIFO, to hang the reader) before the read: every read refuses it.
    (tmp_path / "secret").write_text("the api token")
    prefix = tmp_path / "objects"
    prefix.mkdir()
    (prefix / "data.txt").write_text("harmless")
    store = store_for(prefix.as_uri(), Settings(home=tmp_path))
    [listed] = store.list_objects(prefix.as_uri())
    (prefix / "data.txt").unlink()
    (prefix / "data.txt").symlink_to(tmp_path / "secret")
    reads = {
        "get_bytes": lambda: store.get_bytes(listed.uri),
        "get_range": lambda: store.get_range(listed.uri, 0, 5),
        "download": lambda: store.download(listed.uri, tmp_path / "got" / "data.txt"),
    }
    for read in reads.values():
        with pytest.raises(StorageError, match="a symbolic link, not an object"):
            read()
    assert not (tmp_path / "got" / "data.txt").exists()
    assert not store.exists(listed.uri) and store.list_objects(listed.uri) == []
    (prefix / "data.txt").unlink()
    os.mkfifo(prefix / "data.txt")
    for read in reads.values():
        with pytest.raises(StorageError, match="not a regular file"):
            read()


def test_file_objects_with_spaces_percent_and_unicode_in_their_names_are_read_back(
    tmp_path: Path,
) -> None:
    # A listed URI is read back as a path: it must not be percent-encoded.
    prefix = tmp_path / "objects"
    prefix.mkdir()
    names = ["a b.txt", "50%.txt", "ü.txt"]
    for name in names:
        (prefix / name).write_text(name)
    store = store_for(prefix.as_uri(), Settings(home=tmp_path))
    found = store.list_objects(prefix.as_uri())
    assert sorted(o.key for o in found) == sorted(names)
    for info in found:
        assert store.get_bytes(info.uri) == info.key.encode()
        assert store.get_range(info.uri, 0, 2) == info.key.encode()[:2]


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


# big objects: multipart uploads, ranged downloads, ranged reads, bounded memory

PART = 5 * MIB


def _small_parts(case: StoreCase, memory: int = 4 * PART) -> ObjectStore:
    """The case's store with the smallest parts S3 allows, so a few MiB already take parts."""
    transfer = TransferSettings(concurrency=4, part_size=PART, memory=memory)
    return store_for(case.root, replace(case.settings, transfer=transfer))


def test_a_big_object_round_trips_in_parts(case: StoreCase, tmp_path: Path) -> None:
    store = _small_parts(case)
    data = os.urandom(3 * PART + 12_345)  # three whole parts and a tail
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    heard: list[int] = []
    store.upload(src, case.uri("big/reported.bin"), on_bytes=heard.append)
    store.upload(src, case.uri("big/plain.bin"))
    assert sum(heard) == len(data)
    listed = store.list_objects(case.uri("big"))
    assert [(o.key, o.size) for o in listed] == [
        ("plain.bin", len(data)),
        ("reported.bin", len(data)),
    ]
    for info in listed:
        store.download(info.uri, tmp_path / "down" / info.key, expected_size=info.size)
        assert (tmp_path / "down" / info.key).read_bytes() == data
    store.download(case.uri("big/plain.bin"), tmp_path / "unsized.bin")  # no size given
    assert (tmp_path / "unsized.bin").read_bytes() == data
    assert store.get_bytes(case.uri("big/plain.bin")) == data
    assert _no_part_files(tmp_path)


def test_an_object_listed_small_that_grew_downloads_whole(case: StoreCase, tmp_path: Path) -> None:
    store = _small_parts(case)
    store.put_bytes(case.uri("grows.bin"), b"small")
    (info,) = store.list_objects(case.uri("grows.bin"))
    store.put_bytes(case.uri("grows.bin"), b"g" * (2 * PART + 1))
    with pytest.raises(StorageError, match="expected 5"):
        store.download(info.uri, tmp_path / "g.bin", expected_size=info.size)
    store.download(info.uri, tmp_path / "g.bin")
    assert (tmp_path / "g.bin").read_bytes() == b"g" * (2 * PART + 1)


@pytest.mark.parametrize("size", [1000, 2 * PART + 7])
def test_an_upload_whose_verify_fails_leaves_the_old_object(
    case: StoreCase, tmp_path: Path, size: int
) -> None:
    """verify runs after the last byte is read and before the object appears; raising aborts."""
    store = _small_parts(case)
    uri = case.uri("v/obj.bin")
    store.put_bytes(uri, b"old")
    src = tmp_path / "new.bin"
    src.write_bytes(b"n" * size)
    calls: list[int] = []

    def refuse() -> None:
        calls.append(1)
        raise StorageError("the source changed while it was read")

    with pytest.raises(StorageError, match="changed while it was read"):
        store.upload(src, uri, verify=refuse)
    assert calls == [1]
    assert store.get_bytes(uri) == b"old"
    assert [o.key for o in store.list_objects(case.uri("v"))] == ["obj.bin"]
    store.upload(src, uri, verify=calls.clear)
    assert store.get_bytes(uri) == b"n" * size
    assert _no_part_files(tmp_path)


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [(0, 0, b""), (0, 3, b"012"), (7, 10, b"789"), (8, 100, b"89"), (10, 20, b""), (50, 60, b"")],
)
def test_get_range_reads_a_slice_cut_at_the_end(
    case: StoreCase, start: int, end: int, expected: bytes
) -> None:
    case.store.put_bytes(case.uri("r.bin"), b"0123456789")
    assert case.store.get_range(case.uri("r.bin"), start, end) == expected


def test_get_range_refuses_missing_objects_and_bad_ranges(case: StoreCase) -> None:
    case.store.put_bytes(case.uri("r.bin"), b"0123456789")
    with pytest.raises(StorageError, match="no such object"):
        case.store.get_range(case.uri("missing.bin"), 0, 4)
    with pytest.raises(StorageError, match="bad byte range 5-2"):
        case.store.get_range(case.uri("r.bin"), 5, 2)
    with pytest.raises(StorageError, match="bad byte range -1-2"):
        case.store.get_range(case.uri("r.bin"), -1, 2)


def test_downloads_never_mix_two_versions(case: StoreCase, tmp_path: Path) -> None:
    """A big object overwritten while it downloads in parts arrives as one version, or fails."""
    store = _small_parts(case, memory=2 * PART)  # one part in flight: slow enough to overlap
    size, uri = 3 * PART, case.uri("mixed.bin")
    versions = []
    for char in b"xy":
        path = tmp_path / f"v{chr(char)}"
        path.write_bytes(bytes([char]) * size)
        versions.append(path)
    store.upload(versions[0], uri)
    done = threading.Event()

    def overwrite() -> None:
        for _round in range(10):
            for path in versions:
                store.upload(path, uri)
        done.set()

    writer = threading.Thread(target=overwrite)
    writer.start()
    dest, whole, changed = tmp_path / "dest.bin", 0, 0
    while not done.is_set():
        try:
            store.download(uri, dest)
        except StorageError as exc:
            assert "changed" in str(exc)
            changed += 1
            continue
        data = dest.read_bytes()
        assert len(data) == size and data == data[:1] * size
        whole += 1
    writer.join()
    assert whole + changed > 0


CHILD = """
import json, sys
from pathlib import Path
from trainops._settings import Settings
from trainops.storage import store_for

def status_bytes(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

uri, src, dest = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
store = store_for(uri, Settings.load())
warm = src.with_name("warm.bin")
warm.write_bytes(b"w" * 1000)
store.upload(warm, uri + ".warm")
store.download(uri + ".warm", dest.with_name("warm.out"))
Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
base = status_bytes("VmRSS")
store.upload(src, uri)
store.download(uri, dest, expected_size=src.stat().st_size)
peak = status_bytes("VmHWM")
print(json.dumps({"base": base, "peak": peak}))
"""


@pytest.mark.slow
def test_a_200_mb_transfer_stays_within_the_memory_bound(case: StoreCase, tmp_path: Path) -> None:
    """Peak RSS of a process uploading then downloading 200 MB grows by about the bound, no more.

    Linux only (it resets the peak RSS through /proc/self/clear_refs after the imports).
    """
    bound_mb, size = 40, 200 * 1_000_000
    src = tmp_path / "ckpt.bin"
    block = os.urandom(MIB)
    with src.open("wb") as out:
        for _ in range(size // MIB):
            out.write(block)
        out.write(block[: size % MIB])
    env = {
        **os.environ,
        **case.settings.s3.client_env(),
        "TRAINOPS_HOME": str(case.settings.home),
        "TRAINOPS_TRANSFER_PART_SIZE_MB": "8",
        "TRAINOPS_TRANSFER_MEMORY_MB": str(bound_mb),
        "TRAINOPS_TRANSFER_CONCURRENCY": "8",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, case.uri("mem/ckpt.bin"), str(src), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    grew_mb = (figures["peak"] - figures["base"]) / MIB
    assert (tmp_path / "out").stat().st_size == size
    assert grew_mb <= bound_mb + 24, f"peak RSS grew by {grew_mb:.0f} MiB; bound {bound_mb} MiB"


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
    with pytest.raises(
        StorageError, match=r"unknown storage scheme 'gs' \(known: file://, s3://\)"
    ):
        store_for("gs://bucket/key", settings)
    with pytest.raises(StorageError, match="not a URI"):
        store_for("bucket/key", settings)
