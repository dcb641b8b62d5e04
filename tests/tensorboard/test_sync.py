"""EventSync: objects of growing event files always end on a record boundary."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.tensorboard._read import scalars, values
from trainops._errors import StorageError
from trainops._settings import Settings
from trainops.storage import ObjectStore, store_for
from trainops.tensorboard import EventSync, SummaryWriter, _sync, complete_length

# Writes N scalar records, each in two parts with a pause between (so the file often ends inside
# a record), then half of one more record, and exits.
TEARING_WRITER = textwrap.dedent(
    """
    import os, random, sys, time
    from trainops.data import tfrecord_frame
    from trainops.tensorboard import file_version_event, scalar_event
    path, count = sys.argv[1], int(sys.argv[2])
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(fd, tfrecord_frame(file_version_event(time.time())))
    print("started", flush=True)
    for step in range(count):
        frame = tfrecord_frame(scalar_event("loss", float(step), step, 1000.0 + step))
        cut = random.randrange(1, len(frame))
        os.write(fd, frame[:cut])
        time.sleep(0.002)
        os.write(fd, frame[cut:])
    last = tfrecord_frame(scalar_event("loss", -1.0, count, 1.0))
    os.write(fd, last[: len(last) // 2])
    """
)


def _store(tmp_path: Path) -> tuple[ObjectStore, str, Path]:
    remote = tmp_path / "remote"
    return store_for(remote.as_uri(), Settings(home=tmp_path / "home")), remote.as_uri(), remote


def test_the_object_never_holds_a_torn_record_while_the_writer_writes(tmp_path: Path) -> None:
    local = tmp_path / "tb"
    local.mkdir()
    store, uri, remote = _store(tmp_path)
    sync = EventSync(local, uri, store)
    name = "events.out.tfevents.1700000000.h.1.0"
    count = 400
    argv = [sys.executable, "-c", TEARING_WRITER, str(local / name), str(count)]
    seen = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as writer:
        assert writer.stdout is not None and writer.stdout.readline() == b"started\n"
        while writer.poll() is None:
            sync.sync_once()
            obj = remote / name
            if obj.exists():
                data = obj.read_bytes()  # a reader of the object, while the file grows
                assert complete_length(data) == len(data)
                seen.append(len(data))
    assert writer.returncode == 0
    assert seen == sorted(seen)  # an object only ever grows
    sync.sync_once(final=True)
    data = (local / name).read_bytes()
    uploaded = (remote / name).read_bytes()
    assert len(uploaded) < len(data)  # the half record at the end stays local
    assert uploaded == data[: complete_length(data)]
    assert values(scalars(remote), "loss") == [float(s) for s in range(count)]


def test_a_growing_file_is_uploaded_again_with_its_new_records_only_when_it_grew(
    tmp_path: Path,
) -> None:
    local = tmp_path / "tb"
    store, uri, remote = _store(tmp_path)
    sync = EventSync(local, uri, store)
    writer = SummaryWriter(local, flush_secs=3600)
    writer.add_scalar("loss", 1.0, 0)
    writer.flush()
    (path,) = writer.file_writer.files
    assert sync.sync_once() == [path.name]
    assert sync.sync_once() == []  # unchanged: nothing sent
    writer.add_scalar("loss", 2.0, 1)
    writer.flush()
    assert sync.sync_once() == [path.name]
    assert values(scalars(remote), "loss") == [1.0, 2.0]
    assert sync.uploaded_bytes(path.name) == path.stat().st_size
    assert sync.uploaded == [path.name]
    writer.close()


def test_other_files_go_up_once_settled_or_at_the_final_pass(tmp_path: Path) -> None:
    local = tmp_path / "tb"
    (local / "run").mkdir(parents=True)
    store, uri, remote = _store(tmp_path)
    sync = EventSync(local, uri, store)
    config = local / "run" / "projector_config.pbtxt"
    config.write_text("a")
    assert sync.sync_once() == []  # new: it may still be changing
    assert sync.sync_once() == ["run/projector_config.pbtxt"]
    assert (remote / "run" / "projector_config.pbtxt").read_text() == "a"
    config.write_text("bb")
    assert sync.sync_once() == []
    assert sync.sync_once(final=True) == ["run/projector_config.pbtxt"]
    assert (remote / "run" / "projector_config.pbtxt").read_text() == "bb"
    (local / ".hidden.tmp").write_text("x")
    (local / "link").symlink_to(config)
    sync.sync_once(final=True)
    assert not (remote / ".hidden.tmp").exists() and not (remote / "link").exists()


def test_a_file_written_anew_is_uploaded_anew(tmp_path: Path) -> None:
    local = tmp_path / "tb"
    store, uri, remote = _store(tmp_path)
    sync = EventSync(local, uri, store)
    with SummaryWriter(local, host="h") as writer:
        for step in range(5):
            writer.add_scalar("loss", float(step), step)
    (path,) = writer.file_writer.files
    sync.sync_once()
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data[: complete_length(data[:60])])  # a shorter file under the same name
    sync.sync_once()
    assert (remote / path.name).read_bytes() == path.read_bytes()


class _FailingStore:
    """Refuses one object name, passes the rest to a real store."""

    def __init__(self, store: ObjectStore, refused: str) -> None:
        self.store = store
        self.refused = refused

    def put_bytes(self, uri: str, data: bytes) -> None:
        if uri.endswith(self.refused):
            raise StorageError(f"{uri}: refused")
        self.store.put_bytes(uri, data)


def test_a_failed_upload_is_raised_after_the_other_files_went_up(tmp_path: Path) -> None:
    local = tmp_path / "tb"
    store, uri, remote = _store(tmp_path)
    for run in ("a", "b"):
        with SummaryWriter(local / run, host="h") as writer:
            writer.add_scalar("x", 1.0, 0)
    refused = next((local / "a").iterdir()).name
    sync = EventSync(local, uri, _FailingStore(store, f"a/{refused}"))  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="refused"):
        sync.sync_once()
    assert values(scalars(remote / "b"), "x") == [1.0]
    sync.store = store
    assert sync.sync_once() == [f"a/{refused}"]


# Mirrors a folder holding a huge sparse event file and prints the objects and the peak memory.
SPARSE_SYNC = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from trainops._settings import Settings
    from trainops.storage import store_for
    from trainops.tensorboard import EventSync
    local, remote = Path(sys.argv[1]), Path(sys.argv[2])
    store = store_for(remote.as_uri(), Settings(home=remote.parent / "home"))
    EventSync(local, remote.as_uri(), store).sync_once(final=True)
    sizes = {p.name: p.stat().st_size for p in remote.rglob("*") if p.is_file()}
    # VmHWM: this program's peak (ru_maxrss would carry a larger parent's across exec).
    status = Path("/proc/self/status").read_text().splitlines()
    peak_mb = int(next(l for l in status if l.startswith("VmHWM:")).split()[1]) / 1024
    print(json.dumps({"objects": sizes, "peak_mb": peak_mb}))
    """
)


def test_a_huge_sparse_event_file_is_scanned_in_pieces(tmp_path: Path) -> None:
    local, remote = tmp_path / "tb", tmp_path / "remote"
    local.mkdir()
    writer = SummaryWriter(local, flush_secs=3600)
    writer.add_scalar("loss", 1.5, 1)
    writer.close()
    [written] = local.iterdir()
    records = written.stat().st_size
    # One whole record, then 2 GiB of holes (a length header of zeros is not a record),
    # and a file that is holes only.
    with written.open("r+b") as handle:
        handle.truncate(2 << 30)
    (local / "events.out.tfevents.1700000000.h.2.0").touch()
    with (local / "events.out.tfevents.1700000000.h.2.0").open("r+b") as handle:
        handle.truncate(2 << 30)
    done = subprocess.run(
        [sys.executable, "-c", SPARSE_SYNC, str(local), str(remote)],
        capture_output=True,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["objects"] == {written.name: records}
    assert report["peak_mb"] < 200, report  # reading either file whole would take 2 GiB


def test_a_large_prefix_is_uploaded_through_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sync, "IN_MEMORY_BYTES", 4096)
    monkeypatch.setattr(_sync, "WINDOW_BYTES", 1000)  # records cross the windows' edges
    local = tmp_path / "tb"
    store, uri, remote = _store(tmp_path)
    writer = SummaryWriter(local, flush_secs=3600)
    for step in range(300):
        writer.add_scalar("loss", float(step), step)
    writer.close()
    [written] = local.iterdir()
    with written.open("ab") as handle:
        handle.write(b"\x10\x00\x00")  # a torn header at the end stays local
    data = written.read_bytes()
    assert len(data) > 4096
    EventSync(local, uri, store).sync_once(final=True)
    assert (remote / written.name).read_bytes() == data[: complete_length(data)]
    assert values(scalars(remote), "loss") == [float(s) for s in range(300)]


def test_a_vouched_file_is_uploaded_to_its_vouched_length_without_reading_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "tb"
    writer = SummaryWriter(local, flush_secs=3600)
    writer.add_scalars("loss", [3.0, 2.0, 1.0], 0, 100.0)
    writer.flush()
    (path,) = writer.file_writer.files
    store, uri, remote = _store(tmp_path)
    sync = EventSync(local, uri, store)
    sync.vouch(writer.file_writer.whole_files())
    reads: list[int] = []
    monkeypatch.setattr(_sync, "whole_records", lambda *args: reads.append(1) or 0)
    assert sync.sync_once() == [path.name]
    assert reads == []  # trusted: no header read
    assert (remote / path.name).read_bytes() == path.read_bytes()
    assert values(scalars(remote), "loss") == [3.0, 2.0, 1.0]
    writer.close()


@pytest.mark.parametrize("change", ["replace", "append"])
def test_a_file_changed_since_it_was_vouched_for_is_read(tmp_path: Path, change: str) -> None:
    local = tmp_path / "tb"
    writer = SummaryWriter(local, flush_secs=3600)
    writer.add_scalars("loss", [3.0, 2.0], 5, 100.0)
    writer.close()
    (path,) = writer.file_writer.files
    data = path.read_bytes()
    if change == "replace":  # the same name, likely the same inode number, its last record torn
        path.unlink()
        path.write_bytes(data[:-3])
        data = data[:-3]
    else:  # a torn tail appended
        with path.open("ab") as handle:
            handle.write(data[-30:-3])
        data += data[-30:-3]
    store, uri, remote = _store(tmp_path)
    sync = EventSync(local, uri, store)
    sync.vouch(writer.file_writer.whole_files())
    sync.sync_once()
    assert len((remote / path.name).read_bytes()) == complete_length(data)
    assert values(scalars(remote), "loss") == ([3.0] if change == "replace" else [3.0, 2.0])
