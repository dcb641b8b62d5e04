"""Checkpoint manifests and sync failures, on DirectorySync against a real file:// store: the
restore skips a listed file that does not match its listing (torn, changed), restores files no
manifest lists (a previous job's) and survives an unreadable manifest; a refusing store is
reported once, however often the upload is retried, and its recovery too."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from trainops._settings import Settings
from trainops.agent.reporting._manifest import manifest_key
from trainops.agent.reporting._sync import DirectorySync
from trainops.storage import ObjectStore, store_for
from trainops.storage._settings import S3Settings

DEADLINE = 30.0


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return store_for(tmp_path.as_uri(), Settings(home=tmp_path))


def _sync(local: Path, remote: Path, store: ObjectStore, host: str, **kw: object) -> DirectorySync:
    return DirectorySync(
        local, remote.as_uri(), store, propagate_deletes=True, interval=0.05,
        safety_interval=0.2, manifest=(host, 1), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_the_restore_skips_a_listed_file_that_does_not_match_and_keeps_the_rest(
    tmp_path: Path, store: ObjectStore
) -> None:
    remote = tmp_path / "remote"
    writer = _sync(tmp_path / "a", remote, store, "algo-1")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "model.pt").write_bytes(b"m" * 5000)
    (tmp_path / "a" / "opt.pt").write_bytes(b"o" * 100)
    assert sorted(writer.final_sync().uploaded) == ["model.pt", "opt.pt"]
    listed = json.loads((remote / manifest_key("algo-1")).read_text())
    assert sorted(listed["files"]) == ["model.pt", "opt.pt"]
    # A torn object (cut short), a changed one (same size) and a previous job's file.
    (remote / "model.pt").write_bytes(b"m" * 100)
    (remote / "opt.pt").write_bytes(b"x" * 100)
    (remote / "old-job.pt").write_bytes(b"old")
    reader = _sync(tmp_path / "b", remote, store, "algo-2")
    assert reader.restore() == 1
    report = reader.last_restore
    assert report is not None
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["old-job.pt"]
    assert "100 bytes where the manifest of algo-1 lists 5000" in report.skipped["model.pt"]
    assert "checksum differs" in report.skipped["opt.pt"]
    assert report.newest is None  # old-job.pt is listed by no manifest: its age is unknown


def test_an_unreadable_manifest_is_reported_and_its_files_restored_as_unlisted(
    tmp_path: Path, store: ObjectStore
) -> None:
    remote = tmp_path / "remote"
    (remote / ".trainops").mkdir(parents=True)
    (remote / manifest_key("algo-9")).write_text("{not json")
    (remote / "ckpt.pt").write_text("w")
    reader = _sync(tmp_path / "b", remote, store, "algo-1")
    assert reader.restore() == 1
    assert reader.last_restore is not None
    [problem] = reader.last_restore.problems
    assert "manifest-algo-9.json: unreadable manifest" in problem
    assert (tmp_path / "b" / "ckpt.pt").read_text() == "w"
    assert not (tmp_path / "b" / ".trainops").exists()


def test_a_local_file_under_the_reserved_folder_is_never_uploaded(
    tmp_path: Path, store: ObjectStore
) -> None:
    remote = tmp_path / "remote"
    local = tmp_path / "a"
    (local / ".trainops").mkdir(parents=True)
    (local / ".trainops" / "manifest-algo-2.json").write_text("forged")
    (local / "ok.pt").write_text("w")
    assert _sync(local, remote, store, "algo-1").final_sync().uploaded == ["ok.pt"]
    assert not (remote / manifest_key("algo-2")).exists()


def test_a_refusing_store_is_reported_once_and_its_recovery_too(
    tmp_path: Path, store: ObjectStore
) -> None:
    remote = tmp_path / "remote"
    remote.write_text("a file where the prefix's folder should be")
    errors: list[str] = []
    recovered: list[str] = []
    sync = _sync(
        tmp_path / "a", remote, store, "algo-1", on_error=errors.append,
        on_recovered=recovered.append,
    )  # fmt: skip
    sync.start()
    try:
        (tmp_path / "a" / "step.pt").write_text("w")
        _wait_for(lambda: sync.errors >= 3, "three failed tries")
        assert len(errors) == 1 and str(remote) in errors[0]
        remote.unlink()
        _wait_for(lambda: bool(recovered), "the recovery")
        assert "recovered: uploaded step.pt" in recovered[0]
    finally:
        sync.stop()
    assert (remote / "step.pt").read_text() == "w"
    assert "step.pt" in json.loads((remote / manifest_key("algo-1")).read_text())["files"]


def test_an_upload_that_makes_no_progress_is_reported_as_stalled(tmp_path: Path) -> None:
    # An S3 endpoint that takes connections and requests but never answers one.
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    done = threading.Event()

    def swallow() -> None:
        server.settimeout(0.1)
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=swallow, daemon=True)
    thread.start()
    s3 = S3Settings(
        endpoint_url=f"http://127.0.0.1:{server.getsockname()[1]}",
        region="us-east-1",
        access_key_id="id",
        secret_access_key="secret",
    )
    prefix = "s3://stalled/ckpt"
    store = store_for(prefix, Settings(home=tmp_path, s3=s3))
    errors: list[str] = []
    sync = DirectorySync(
        tmp_path / "a", prefix, store, propagate_deletes=True, on_error=errors.append,
        manifest=("algo-1", 1), stall_seconds=0.3, watch=False, interval=0.05, idle=False,
    )  # fmt: skip
    try:
        sync.start()
        (tmp_path / "a" / "step.pt").write_text("w")
        _wait_for(lambda: any("stalled" in e for e in errors), "a stall report")
        [stall] = [e for e in errors if "stalled" in e]
        assert "the upload of step.pt has stalled: no progress for" in stall
        assert "secret" not in stall
    finally:
        pid = sync.worker_pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)  # it would wait out the client's own timeouts
        sync.stop()
        done.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.s3
def test_over_s3_only_a_host_elsewhere_restores_what_was_finished_and_nothing_torn(
    tmp_path: Path, s3_settings: Settings, s3_bucket: str
) -> None:
    prefix = f"s3://{s3_bucket}/ckpt"
    store = store_for(prefix, s3_settings)
    local = tmp_path / "host-1"
    local.mkdir()
    (local / "model.pt").write_bytes(b"m" * 300_000)
    (local / "step.json").write_text('{"step": 40}')
    writer = DirectorySync(
        local, prefix, store, propagate_deletes=True, manifest=("algo-1", 1), watch=False
    )
    assert sorted(writer.final_sync().uploaded) == ["model.pt", "step.json"]
    store.put_bytes(f"{prefix}/model.pt", b"m" * 1000)  # as a torn upload would leave it
    reader = DirectorySync(
        tmp_path / "host-2", prefix, store, propagate_deletes=True, manifest=("algo-2", 2)
    )
    assert reader.restore() == 1
    assert reader.last_restore is not None and list(reader.last_restore.skipped) == ["model.pt"]
    assert (tmp_path / "host-2" / "step.json").read_text() == '{"step": 40}'
    assert not (tmp_path / "host-2" / "model.pt").exists()


class _Death(BaseException):
    """The host dies here: nothing after this step of the upload sequence happens."""


def _dying_store(tmp_path: Path, moment: str) -> ObjectStore:
    """A real file:// store whose host dies at ``moment`` of a checkpoint file's upload:
    ``before-upload`` (the new version never lands), ``after-upload`` (it landed, and the next
    manifest is never written) or ``after-manifest`` (the manifest after it was written)."""
    base = type(store_for(tmp_path.as_uri(), Settings(home=tmp_path)))

    class Dying(base):  # type: ignore[valid-type,misc]
        landed = False

        def upload(self, src: Path, uri: str, *args: object, **kw: object) -> None:
            if moment == "before-upload":
                raise _Death
            super().upload(src, uri, *args, **kw)
            self.landed = True

        def put_bytes(self, uri: str, data: bytes) -> None:
            if self.landed and moment == "after-upload":
                raise _Death
            super().put_bytes(uri, data)
            if self.landed:
                raise _Death

    return Dying()  # type: ignore[no-any-return]


@pytest.mark.parametrize("moment", ["before-upload", "after-upload", "after-manifest"])
@pytest.mark.parametrize("path", ["uploader", "final"])
def test_a_death_at_any_moment_of_an_overwrite_leaves_a_restorable_checkpoint(
    tmp_path: Path, store: ObjectStore, moment: str, path: str
) -> None:
    # The script replaces step.pt atomically; the host dies during the new version's upload.
    remote, local = tmp_path / "remote", tmp_path / "a"
    local.mkdir()
    (local / "step.pt").write_bytes(b"step 1 " * 1000)
    writer = _sync(local, remote, store, "algo-1")
    assert writer.sync_once().uploaded == ["step.pt"]
    (local / "step.tmp").write_bytes(b"step 2 " * 1200)
    (local / "step.tmp").rename(local / "step.pt")
    writer._mirror.store = _dying_store(tmp_path, moment)
    with pytest.raises(_Death):
        writer.sync_once() if path == "uploader" else writer.final_sync()
    reader = _sync(tmp_path / "b", remote, store, "algo-1")
    assert reader.restore() == 1
    report = reader.last_restore
    assert report is not None and report.skipped == {}
    landed = b"step 1 " * 1000 if moment == "before-upload" else b"step 2 " * 1200
    assert (tmp_path / "b" / "step.pt").read_bytes() == landed
    assert report.newest is not None and report.newest[0] == "step.pt"


def test_an_object_neither_listed_nor_pending_is_still_refused(
    tmp_path: Path, store: ObjectStore
) -> None:
    remote, local = tmp_path / "remote", tmp_path / "a"
    local.mkdir()
    (local / "step.pt").write_bytes(b"1" * 100)
    writer = _sync(local, remote, store, "algo-1")
    writer.sync_once()
    (local / "step.pt").write_bytes(b"2" * 100)
    writer._mirror.store = _dying_store(tmp_path, "after-upload")
    with pytest.raises(_Death):
        writer.sync_once()
    listed = json.loads((remote / manifest_key("algo-1")).read_text())
    assert sorted(listed["files"]) == sorted(listed["pending"]) == ["step.pt"]
    (remote / "step.pt").write_bytes(b"3" * 100)  # changed after it was listed or announced
    reader = _sync(tmp_path / "b", remote, store, "algo-2")
    assert reader.restore() == 0
    assert reader.last_restore is not None
    assert "checksum differs" in reader.last_restore.skipped["step.pt"]


def test_a_manifest_written_before_pending_existed_still_restores(
    tmp_path: Path, store: ObjectStore
) -> None:
    remote = tmp_path / "remote"
    (remote / ".trainops").mkdir(parents=True)
    (remote / "step.pt").write_bytes(b"old")
    digest = hashlib.sha256(b"old").hexdigest()
    old = {"version": 1, "host": "algo-1", "attempt": 1, "written_at": 1.0,
           "files": {"step.pt": {"size": 3, "sha256": digest, "mtime": 2.0}}}  # fmt: skip
    (remote / manifest_key("algo-1")).write_text(json.dumps(old))
    reader = _sync(tmp_path / "b", remote, store, "algo-1")
    assert reader.restore() == 1
    assert reader.last_restore is not None and reader.last_restore.newest is not None
    assert reader.last_restore.newest[1].entry.mtime == 2.0


@pytest.mark.parametrize("pending", [[1], {"step.pt": {"size": "3"}}, {"step.pt": 7}])
def test_a_manifest_with_a_malformed_pending_is_reported_and_ignored(
    tmp_path: Path, store: ObjectStore, pending: object
) -> None:
    remote = tmp_path / "remote"
    (remote / ".trainops").mkdir(parents=True)
    (remote / "step.pt").write_bytes(b"old")
    body = {"version": 1, "host": "algo-1", "attempt": 1, "files": {}, "pending": pending}
    (remote / manifest_key("algo-1")).write_text(json.dumps(body))
    reader = _sync(tmp_path / "b", remote, store, "algo-1")
    assert reader.restore() == 1  # its file counts as unlisted
    assert reader.last_restore is not None
    [problem] = reader.last_restore.problems
    assert "unreadable manifest" in problem and problem.endswith("; ignored")
