"""DirectorySync against a real file:// store: restore, stable-only uploads, deletions, final sync."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainops._settings import Settings
from trainops.agent import DirectorySync
from trainops.storage import ObjectStore, store_for


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote"
    path.mkdir()
    return path


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return store_for(tmp_path.as_uri(), Settings(home=tmp_path))


def _sync(tmp_path: Path, remote: Path, store: ObjectStore, deletes: bool = True) -> DirectorySync:
    return DirectorySync(
        tmp_path / "local", remote.as_uri(), store, propagate_deletes=deletes, interval=0.05
    )


def _remote_files(remote: Path) -> dict[str, str]:
    return {
        p.relative_to(remote).as_posix(): p.read_text() for p in remote.rglob("*") if p.is_file()
    }


def test_restore_copies_every_remote_object(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    (remote / "epoch-1").mkdir()
    (remote / "epoch-1" / "model.pt").write_text("weights")
    (remote / "state.json").write_text("{}")
    sync = _sync(tmp_path, remote, store)
    assert sync.restore() == 2
    assert (tmp_path / "local/epoch-1/model.pt").read_text() == "weights"
    assert sync.sync_once().uploaded == []  # restored files are already known
    assert sync.sync_once().uploaded == []


def test_only_files_stable_across_two_scans_are_uploaded(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    sync = _sync(tmp_path, remote, store)
    local = tmp_path / "local"
    local.mkdir()
    (local / "ckpt.pt").write_text("part")
    assert sync.sync_once().uploaded == []  # first sight: maybe still being written
    (local / "ckpt.pt").write_text("partial, longer")
    assert sync.sync_once().uploaded == []  # changed since the last scan
    assert sync.sync_once().uploaded == ["ckpt.pt"]
    assert _remote_files(remote) == {"ckpt.pt": "partial, longer"}
    assert sync.sync_once().uploaded == []  # unchanged: not uploaded again
    (local / "ckpt.pt").write_text("final version")
    sync.sync_once()
    assert sync.sync_once().uploaded == ["ckpt.pt"]
    assert _remote_files(remote) == {"ckpt.pt": "final version"}


def test_deletions_propagate_only_for_files_this_host_knew(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    (remote / "restored.pt").write_text("old")
    sync = _sync(tmp_path, remote, store)
    sync.restore()
    local = tmp_path / "local"
    (local / "mine.pt").write_text("mine")
    sync.sync_once()
    sync.sync_once()
    (remote / "other-host.pt").write_text("not mine")
    (local / "restored.pt").unlink()
    (local / "mine.pt").unlink()
    result = sync.sync_once()
    assert result.deleted == ["mine.pt", "restored.pt"]
    assert _remote_files(remote) == {"other-host.pt": "not mine"}


def test_without_propagation_remote_objects_stay(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    sync = _sync(tmp_path, remote, store, deletes=False)
    local = tmp_path / "local"
    local.mkdir()
    (local / "a.txt").write_text("a")
    sync.final_sync()
    (local / "a.txt").unlink()
    assert sync.sync_once().deleted == []
    assert _remote_files(remote) == {"a.txt": "a"}


def test_final_sync_uploads_everything_now(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    sync = _sync(tmp_path, remote, store)
    local = tmp_path / "local"
    (local / "nested").mkdir(parents=True)
    (local / "nested" / "last.pt").write_text("just written")
    (local / "gone.pt").write_text("x")
    sync.final_sync()
    (local / "gone.pt").unlink()
    result = sync.final_sync()
    assert result.deleted == ["gone.pt"]
    assert _remote_files(remote) == {"nested/last.pt": "just written"}


def test_the_background_thread_uploads_while_running(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    sync = _sync(tmp_path, remote, store)
    (tmp_path / "local").mkdir()
    sync.start()
    try:
        (tmp_path / "local" / "live.txt").write_text("live")
        deadline = time.monotonic() + 30
        while "live.txt" not in _remote_files(remote):
            assert time.monotonic() < deadline, "the background sync never uploaded live.txt"
            time.sleep(0.02)
    finally:
        sync.stop()
    assert _remote_files(remote) == {"live.txt": "live"}
