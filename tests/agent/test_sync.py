"""DirectorySync against real stores: restore, finished-only uploads, deletions, the uploader.

The background uploader is a real child process; it is exercised on its inotify path (with the
safety scan pushed out of reach, so only events can explain an upload) and on its scan path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from trainops._settings import Settings, TransferSettings
from trainops.agent import DirectorySync
from trainops.agent.reporting._priority import _autogroup_nice
from trainops.agent.reporting._sync import DEATH_WINDOW, SyncedFile, _background
from trainops.agent.reporting._watch import Inotify, inotify_available
from trainops.storage import ObjectStore, store_for

DEADLINE = 30.0  # generous: a wait that never ends is a failure, not a timing figure


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
        p.relative_to(remote).as_posix(): p.read_text()
        for p in remote.rglob("*")
        if p.is_file() and not p.name.endswith(".part")
    }


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


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


def test_a_file_open_for_writing_is_not_uploaded_until_closed(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    sync = _sync(tmp_path, remote, store)
    local = tmp_path / "local"
    local.mkdir()
    with (local / "ckpt.pt").open("w") as handle:
        handle.write("part")
        handle.flush()
        assert sync.sync_once().uploaded == []  # still open for writing
        handle.write(", then more")
        handle.flush()
        assert sync.sync_once().uploaded == []
    assert sync.sync_once().uploaded == ["ckpt.pt"]  # closed: uploaded on the next pass
    assert _remote_files(remote) == {"ckpt.pt": "part, then more"}
    assert sync.sync_once().uploaded == []  # unchanged: not uploaded again
    (local / "ckpt.pt").write_text("final version")
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
    assert sync.sync_once().uploaded == ["mine.pt"]
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


# The background uploader, on both of its paths ---------------------------------------------


@pytest.fixture(params=["inotify", "scan"])
def running(
    request: pytest.FixtureRequest, tmp_path: Path, remote: Path, store: ObjectStore
) -> Iterator[DirectorySync]:
    """A started sync; on the inotify path the safety scan is an hour away."""
    inotify = request.param == "inotify"
    errors: list[str] = []
    sync = DirectorySync(
        tmp_path / "local",
        remote.as_uri(),
        store,
        propagate_deletes=True,
        interval=0.05,
        safety_interval=3600 if inotify else 0.05,
        watch=inotify,
        on_error=errors.append,
    )
    (tmp_path / "local").mkdir()
    sync.start()
    try:
        yield sync
    finally:
        sync.stop()
    assert errors == []


@pytest.mark.skipif(not inotify_available(), reason="the rule needs inotify")
def test_what_a_death_by_signal_may_have_torn_is_left_and_renamed_files_are_not(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    """The agent says a script process died of a signal it did not send: a file written in
    place just before is left (the death closed it, maybe mid-write); one renamed into place is
    whole, and one written long before is too: both are uploaded."""
    local = tmp_path / "local"
    local.mkdir()
    sync = DirectorySync(local, remote.as_uri(), store, propagate_deletes=True, interval=0.05,
                         watch=True, eager=True, manifest=("algo-1", 1))  # fmt: skip
    sync.start()
    try:
        (local / "first.pt").write_text("1")
        _wait_for(lambda: "first.pt" in _remote_files(remote), "the first upload")
        (local / "first.pt").write_text("half")  # in place, closed by the death
        (local / "step.pt.tmp").write_text("whole")
        (local / "step.pt.tmp").rename(local / "step.pt")  # renamed into place
        death = time.time()
        sync.note_death(signal.SIGKILL, death)
        _wait_for(lambda: "first.pt" in sync.torn, "the uploader's word on the death")
        # A held script dies a moment after its holder, whose death the agent saw: its close
        # may come after the uploader has judged the death.
        (local / "straggler.pt").write_text("half too")
        time.sleep(DEATH_WINDOW + 0.1)  # past the moments that count as the death's own
        (local / "later.pt").write_text("2")  # by a process that lived on
        _wait_for(lambda: "later.pt" in _remote_files(remote), "the upload of a later file")
        result = sync.final_sync()
    finally:
        sync.stop()
    assert result.torn == {"first.pt": "SIGKILL", "straggler.pt": "SIGKILL"}
    assert result.left["first.pt"] == (
        "it was written in place just before a process of the script died of SIGKILL, which"
        " may have left it half-written"
    )
    assert result.left.keys() == {"first.pt", "straggler.pt"}
    files = {k: v for k, v in _remote_files(remote).items() if not k.startswith(".trainops/")}
    assert files == {"first.pt": "1", "step.pt": "whole", "later.pt": "2"}


def test_finished_files_are_uploaded_promptly_also_in_new_subdirectories(
    running: DirectorySync, remote: Path
) -> None:
    local = running.local_dir
    (local / "live.txt").write_text("live")
    _wait_for(lambda: "live.txt" in _remote_files(remote), "live.txt uploaded")
    (local / "epoch-3" / "deep").mkdir(parents=True)
    (local / "epoch-3" / "deep" / "model.pt").write_text("weights")
    _wait_for(lambda: "epoch-3/deep/model.pt" in _remote_files(remote), "nested file uploaded")
    tmp = local / "state.json.tmp"
    tmp.write_text('{"epoch": 3}')
    tmp.rename(local / "state.json")  # the write-then-rename pattern
    _wait_for(lambda: "state.json" in _remote_files(remote), "renamed file uploaded")
    _wait_for(lambda: "state.json.tmp" not in _remote_files(remote), "temporary name gone")
    assert _remote_files(remote) == {
        "live.txt": "live",
        "epoch-3/deep/model.pt": "weights",
        "state.json": '{"epoch": 3}',
    }
    assert running.final_sync().uploaded == []  # the uploader reported what it sent


def test_deletions_propagate_in_the_background(running: DirectorySync, remote: Path) -> None:
    local = running.local_dir
    (local / "old.pt").write_text("old")
    _wait_for(lambda: "old.pt" in _remote_files(remote), "old.pt uploaded")
    (local / "old.pt").unlink()
    _wait_for(lambda: "old.pt" not in _remote_files(remote), "old.pt deleted remotely")


def test_a_slowly_written_file_never_appears_partial(running: DirectorySync, remote: Path) -> None:
    """A writer appends in chunks with pauses longer than a scan; the reader never sees it torn."""
    chunk, chunks = b"c" * 4096, 12
    local = running.local_dir
    seen_sizes: list[int] = []
    done = threading.Event()

    def watch_remote() -> None:
        while not done.is_set():
            path = remote / "slow.bin"
            if path.exists():
                seen_sizes.append(path.stat().st_size)
            time.sleep(0.005)

    reader = threading.Thread(target=watch_remote)
    reader.start()
    try:
        with (local / "slow.bin").open("wb") as handle:
            for _ in range(chunks):
                handle.write(chunk)
                handle.flush()
                time.sleep(0.12)  # longer than two scans of the scan path
        _wait_for(lambda: (remote / "slow.bin").exists(), "slow.bin uploaded after close")
        time.sleep(0.1)
    finally:
        done.set()
        reader.join()
    assert seen_sizes and set(seen_sizes) == {len(chunk) * chunks}
    assert (remote / "slow.bin").read_bytes() == chunk * chunks


@pytest.mark.s3
def test_the_uploader_reaches_s3_and_never_shows_a_partial_object(
    tmp_path: Path, s3_settings: Settings, s3_bucket: str
) -> None:
    prefix = f"s3://{s3_bucket}/ckpt"
    store = store_for(prefix, s3_settings)
    sync = DirectorySync(
        tmp_path / "local", prefix, store, propagate_deletes=True, safety_interval=3600
    )
    sync.start()
    sizes: list[int] = []
    try:
        with (tmp_path / "local" / "model.pt").open("wb") as handle:
            for _ in range(5):
                handle.write(b"m" * 100_000)
                handle.flush()
                sizes += [o.size for o in store.list_objects(prefix)]
                time.sleep(0.05)
        _wait_for(lambda: bool(store.list_objects(prefix)), "model.pt on S3")
        assert [(o.key, o.size) for o in store.list_objects(prefix)] == [("model.pt", 500_000)]
        (tmp_path / "local" / "model.pt").unlink()
        _wait_for(lambda: not store.list_objects(prefix), "model.pt deleted on S3")
    finally:
        sync.stop()
    assert sizes == []  # nothing was visible while the file was open


def test_an_empty_directory_costs_no_uploader_until_its_first_file(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    sync = _sync(tmp_path, remote, store)
    sync.start()
    try:
        assert sync._worker is None  # most jobs never write output/intermediate
        (tmp_path / "local" / "first.bin").write_bytes(b"x" * 10)
        _wait_for(lambda: _remote_files(remote) == {"first.bin": "x" * 10}, "the first upload")
        assert sync._worker is not None
    finally:
        sync.stop()
    assert sync._worker is None


def test_an_eager_sync_starts_its_uploader_before_any_file_exists(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    """Checkpoints: the uploader's start-up is paid before training, not at its first file."""
    sync = DirectorySync(
        tmp_path / "local", remote.as_uri(), store, propagate_deletes=True, eager=True
    )
    sync.start()
    try:
        assert sync.worker_pid is not None and psutil.pid_exists(sync.worker_pid)
        (tmp_path / "local" / "first.bin").write_bytes(b"x" * 10)
        _wait_for(lambda: _remote_files(remote) == {"first.bin": "x" * 10}, "the first upload")
    finally:
        sync.stop()
    assert sync.worker_pid is None


def test_the_last_sync_does_not_wait_for_an_uploader_still_starting(
    tmp_path: Path, remote: Path, store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that ends before its uploader has started (a short script; imports that take
    seconds on a busy machine): the stop ends the uploader where it is, no error is reported,
    and the last sync uploads what there is. The uploader's start is held here (30 s, in its
    ``sitecustomize``) so that the stop surely comes first: waiting for it would let it wake."""
    held, started, woke = tmp_path / "held", tmp_path / "started", tmp_path / "woke"
    held.mkdir()
    (held / "sitecustomize.py").write_text(
        f"import time\nopen({str(started)!r}, 'w').close()\ntime.sleep(30)\n"
        f"open({str(woke)!r}, 'w').close()\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(held), os.environ.get("PYTHONPATH", "")]))
    errors: list[str] = []
    sync = DirectorySync(tmp_path / "local", remote.as_uri(), store, propagate_deletes=True,
                         eager=True, on_error=errors.append)  # fmt: skip
    sync.start()
    (tmp_path / "local" / "last.pt").write_text("weights")
    _wait_for(started.exists, "the uploader's start")
    result = sync.final_sync()
    assert result.uploaded == ["last.pt"] and _remote_files(remote) == {"last.pt": "weights"}
    assert errors == [] and not woke.exists()


def test_the_background_uploader_sends_sync_part_concurrency_parts_at_once(
    tmp_path: Path,
) -> None:
    """While the script runs, one part in flight by default (docs/storage.md says why); the
    upload after the script ends, in the agent, keeps ``part_concurrency``."""
    transfer = TransferSettings(part_concurrency=6, sync_part_concurrency=2)
    settings = Settings(home=tmp_path, transfer=transfer)
    background = _background(settings)
    assert background.transfer == TransferSettings(part_concurrency=2, sync_part_concurrency=2)
    assert background.home == settings.home and background.s3 == settings.s3


@pytest.mark.parametrize("link", ["file", "directory"])
def test_symbolic_links_are_never_followed_by_an_upload(
    tmp_path: Path, remote: Path, store: ObjectStore, link: str
) -> None:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("not the job's")
    sync = _sync(tmp_path, remote, store)
    local = sync.local_dir
    local.mkdir()
    if link == "file":
        (local / "leak.txt").symlink_to(secret / "secret.txt")
        rel = "leak.txt"
    else:
        (local / "leakdir").symlink_to(secret, target_is_directory=True)
        rel = "leakdir/secret.txt"
    # What an inotify event names is uploaded even when no scan would have listed it.
    assert sync._mirror.upload(rel, force=True) is False
    assert _remote_files(remote) == {}


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
@pytest.mark.parametrize("idle", [True, False])
def test_the_uploader_and_its_threads_run_at_the_chosen_low_priority(
    tmp_path: Path, remote: Path, store: ObjectStore, idle: bool
) -> None:
    """Every thread of the uploader yields the CPU to the script (idle: its disk I/O too)."""
    sync = DirectorySync(
        tmp_path / "local", remote.as_uri(), store, propagate_deletes=True, nice=7, idle=idle
    )
    sync.start()
    try:
        (tmp_path / "local" / "first.bin").write_bytes(b"x" * 10)
        _wait_for(lambda: _remote_files(remote) == {"first.bin": "x" * 10}, "the first upload")
        assert sync._worker is not None
        uploader = psutil.Process(sync._worker.pid)
        threads = [psutil.Process(thread.id) for thread in uploader.threads()]
        policies = {os.sched_getscheduler(thread.pid) for thread in threads}
        nices = {thread.nice() for thread in threads}
        io_class = uploader.ionice().ioclass
        session = os.getsid(uploader.pid)
        autogroup = _autogroup_nice(Path(f"/proc/{uploader.pid}/autogroup"))
    finally:
        sync.stop()
    assert policies == {os.SCHED_IDLE if idle else os.SCHED_BATCH}
    assert nices == {min(19, os.nice(0) + 7)}
    assert (io_class == psutil.IOPRIO_CLASS_IDLE) is idle
    # A session of its own, whose autogroup is lowered: where the kernel shares the CPU between
    # sessions first, the script (in another session) would otherwise meet it at equal weight.
    assert session == uploader.pid != os.getsid(0)
    if autogroup is not None:
        assert autogroup == (19 if idle else min(19, os.nice(0) + 7))


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
@pytest.mark.skipif(os.geteuid() != 0, reason="raising a priority back needs privileges")
def test_the_last_sync_gives_the_uploader_the_agents_priority(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    """Once the script has ended there is no step left to protect: the uploader finishing its
    upload for the last sync must not starve at idle priority on a busy machine."""
    sync = DirectorySync(tmp_path / "local", remote.as_uri(), store, propagate_deletes=True)
    sync.start()
    try:
        (tmp_path / "local" / "first.bin").write_bytes(b"x" * 10)
        _wait_for(lambda: _remote_files(remote) == {"first.bin": "x" * 10}, "the first upload")
        assert sync._worker is not None
        uploader = psutil.Process(sync._worker.pid)
        assert os.sched_getscheduler(uploader.pid) == os.SCHED_IDLE
        sync._hasten()
        threads = [psutil.Process(thread.id) for thread in uploader.threads()]
        policies = {os.sched_getscheduler(thread.pid) for thread in threads}
        nices = {thread.nice() for thread in threads}
        io_class = uploader.ionice().ioclass
    finally:
        sync.final_sync()
    assert policies == {os.SCHED_OTHER}
    assert nices == {os.nice(0)}
    assert io_class != psutil.IOPRIO_CLASS_IDLE


def test_the_last_sync_does_not_wait_for_an_uploader_that_has_not_started(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    """An interruption soon after a checkpointing job's start: its eager uploader may still be
    in its interpreter's start-up (at idle priority a busy machine can hold that off for
    seconds). It has uploaded nothing, so the last sync kills it rather than waiting, uploads
    everything itself, and calls no failure. Here the uploader is frozen before it could start
    (it needs a hundred milliseconds of imports; the freeze comes microseconds after its spawn),
    so a sync that waited for it would never end."""
    errors: list[str] = []
    sync = DirectorySync(
        tmp_path / "local",
        remote.as_uri(),
        store,
        propagate_deletes=True,
        eager=True,
        on_error=errors.append,
    )
    sync.start()
    assert sync._worker is not None
    frozen = sync._worker.pid
    os.kill(frozen, signal.SIGSTOP)
    try:
        assert not sync._worker_ready.is_set()  # the premise: it had not started
        (tmp_path / "local" / "last.pt").write_text("written at the notice")
        syncing = threading.Thread(target=sync.final_sync)
        syncing.start()
        syncing.join(DEADLINE)
        assert not syncing.is_alive(), "the last sync waited for the frozen uploader"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(frozen, signal.SIGKILL)
    assert _remote_files(remote) == {"last.pt": "written at the notice"}
    assert not psutil.pid_exists(frozen)  # killed and reaped
    assert errors == []


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_the_agent_lowers_the_uploader_before_its_interpreter_has_started(tmp_path: Path) -> None:
    # The uploader's start-up and imports run when the first checkpoint appears, mid-training:
    # the agent lowers the new process itself, at once, with what the uploader sets again later.
    from trainops.agent.reporting._sync import _lower_priority

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        base = os.getpriority(os.PRIO_PROCESS, 0)
        _lower_priority(7, idle=True, pid=child.pid, base=base)
        _lower_priority(7, idle=True, pid=child.pid, base=base)  # twice: the same, not 14
        proc = psutil.Process(child.pid)
        assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        assert proc.nice() == min(19, base + 7)
        assert proc.ionice().ioclass == psutil.IOPRIO_CLASS_IDLE
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not inotify_available(), reason="inotify is Linux's")
def test_a_file_written_under_another_name_and_renamed_has_its_write_time_measured(
    tmp_path: Path, remote: Path, store: ObjectStore
) -> None:
    """The usual safe checkpoint (write a temporary file, rename it into place) is measured
    from the temporary file's creation: the cost advice's checkpoint time C comes from here."""
    synced: list[SyncedFile] = []
    local = tmp_path / "local"
    sync = DirectorySync(
        local,
        remote.as_uri(),
        store,
        propagate_deletes=True,
        interval=0.05,
        manifest=("algo-1", 1),
        on_synced=synced.append,
        eager=True,
    )
    sync.start()
    try:
        (local / "ready").write_bytes(b"r")  # once it is uploaded, the uploader is watching
        _wait_for(lambda: any(s.rel == "ready" for s in synced), "the uploader's first upload")
        started = time.time()
        with open(local / "ckpt.pt.tmp", "wb") as out:
            out.write(b"a" * 1000)
            out.flush()
            _wait_for(lambda: "ckpt.pt.tmp" in sync.first_seen, "the temporary file seen")
            out.write(b"b" * 1000)  # a checkpoint that takes a while to write
        renamed = time.time()
        os.rename(local / "ckpt.pt.tmp", local / "ckpt.pt")
        _wait_for(lambda: any(s.rel == "ckpt.pt" for s in synced), "the renamed file's upload")
    finally:
        sync.final_sync()
    found = next(s for s in synced if s.rel == "ckpt.pt")
    assert found.entry is not None and found.entry.size == 2000
    # Its write began when the temporary file was seen, not when the final name appeared.
    assert found.first_seen == sync.first_seen["ckpt.pt.tmp"]
    assert found.first_seen is not None and started <= found.first_seen < renamed
    assert found.upload_seconds is not None and found.upload_seconds >= 0
    assert not any(s.rel == "ckpt.pt.tmp" for s in synced)  # renamed before it was finished


def test_a_rename_into_the_watched_tree_names_its_source(tmp_path: Path) -> None:
    if not inotify_available():
        pytest.skip("inotify is Linux's")
    (tmp_path / "sub").mkdir()
    watch = Inotify(tmp_path)
    try:
        (tmp_path / "sub" / "a.tmp").write_bytes(b"x")
        os.rename(tmp_path / "sub" / "a.tmp", tmp_path / "sub" / "a")
        outside = tmp_path.parent / f"{tmp_path.name}-outside"
        outside.write_bytes(b"y")
        os.rename(outside, tmp_path / "b")  # from outside the tree: no source
        events = watch.read(1.0) + watch.read(0.2)
    finally:
        watch.close()
    closed = {e.rel: e.source for e in events if e.kind == "closed"}
    assert closed["sub/a"] == "sub/a.tmp"
    assert closed["b"] is None
