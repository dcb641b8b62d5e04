"""Many-object transfers (upload_tree, download_objects) against every registered store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.storage.conftest import StoreCase
from trainops import StorageError
from trainops.storage import ObjectInfo, Progress, download_objects, upload_tree

FILES = {
    "model.pt": b"m" * 70_000,
    "code/train.py": b"print('hi')\n",
    "code/pkg/__init__.py": b"",
    "deep/a/b/c/d.json": b'{"d": 1}',
}


def _write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _read_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


class Recorder:
    """Collects the snapshots a progress callback is handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int, int]] = []

    def __call__(self, progress: Progress) -> None:
        self.seen.append(
            (
                progress.done_objects,
                progress.total_objects,
                progress.done_bytes,
                progress.total_bytes,
            )
        )


def test_upload_tree_then_download_objects_round_trips(case: StoreCase, tmp_path: Path) -> None:
    src = _write_tree(tmp_path / "src", FILES)
    up = Recorder()
    uris = upload_tree(case.store, src, case.uri("job/out"), workers=3, on_progress=up)
    assert uris == sorted(case.uri("job/out", rel) for rel in FILES)
    listed = case.store.list_objects(case.uri("job/out"))
    assert [o.key for o in listed] == sorted(FILES)
    down = Recorder()
    result = download_objects(case.store, listed, tmp_path / "dest", workers=3, on_progress=down)
    assert _read_tree(tmp_path / "dest") == FILES
    total = sum(len(d) for d in FILES.values())
    assert (result.done_objects, result.done_bytes) == (len(FILES), total)
    for recorder in (up, down):
        assert [s[0] for s in recorder.seen] == list(range(1, len(FILES) + 1))
        assert recorder.seen[-1] == (len(FILES), len(FILES), total, total)
        assert [s[2] for s in recorder.seen] == sorted(s[2] for s in recorder.seen)


def test_upload_tree_skips_symlinks(case: StoreCase, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("do not upload")
    src = _write_tree(tmp_path / "src", {"real.txt": b"r"})
    os.symlink(outside, src / "link.txt")
    assert upload_tree(case.store, src, case.uri("t")) == [case.uri("t", "real.txt")]


def test_empty_transfers_do_nothing(case: StoreCase, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert upload_tree(case.store, tmp_path / "empty", case.uri("none")) == []
    result = download_objects(case.store, [], tmp_path / "dest")
    assert (result.total_objects, result.done_objects) == (0, 0)


@pytest.mark.parametrize("key", ["../escape.txt", "a/../../escape.txt", "/abs/escape.txt", ".."])
def test_keys_escaping_the_destination_are_refused(
    case: StoreCase, tmp_path: Path, key: str
) -> None:
    case.store.put_bytes(case.uri("x.txt"), b"x")
    good = ObjectInfo(uri=case.uri("x.txt"), key="fine.txt", size=1)
    bad = ObjectInfo(uri=case.uri("x.txt"), key=key, size=1)
    dest = tmp_path / "work" / "dest"
    with pytest.raises(StorageError, match="outside"):
        download_objects(case.store, [good, bad], dest)
    assert not (tmp_path / "work").exists() or _read_tree(tmp_path / "work") == {}


def test_a_failed_object_fails_the_transfer(case: StoreCase, tmp_path: Path) -> None:
    case.store.put_bytes(case.uri("here.txt"), b"here")
    items = [
        ObjectInfo(uri=case.uri("here.txt"), key="here.txt", size=4),
        ObjectInfo(uri=case.uri("gone.txt"), key="gone.txt", size=4),
    ]
    with pytest.raises(StorageError, match=r"gone\.txt"):
        download_objects(case.store, items, tmp_path / "dest")
    assert not (tmp_path / "dest" / "gone.txt").exists()
