"""The debugger tensors' sync: index after event, end marker last, hostile directories."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.agent.sidecars.test_conformance import make_host
from trainops._settings import Settings
from trainops.agent.reporting._debug_sync import DebugSync, event_file_of
from trainops.agent.sidecars._debugger import DebuggerSidecar
from trainops.storage import store_for
from trainops.storage._file import FileStore

STEP = "000000000100"
EVENT = f"events/{STEP}/{STEP}_worker_0.tfevents"
INDEX = f"index/000000000/{STEP}_worker_0.json"


def _sync(tmp_path: Path, **bounds: int) -> tuple[DebugSync, Path, Path, list[str]]:
    local, remote = tmp_path / "tensors", tmp_path / "remote"
    local.mkdir()
    lines: list[str] = []
    uri = remote.as_uri()
    store = store_for(uri, Settings(home=tmp_path / "home"))
    return DebugSync(local, uri, store, lines.append, **bounds), local, remote, lines


def _write(root: Path, rel: str, data: bytes = b"x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_an_index_file_goes_up_only_after_its_event_file(tmp_path: Path) -> None:
    sync, local, remote, _ = _sync(tmp_path, max_file_bytes=100)
    _write(local, EVENT, b"e" * 500)  # over the bound: never uploaded
    _write(local, INDEX, b"{}")
    assert sync.sync_once(final=True) == []
    assert not (remote / INDEX).exists()
    _write(local, EVENT, b"e" * 50)  # rewritten within bounds
    assert sync.sync_once() == [EVENT, INDEX]
    assert (remote / EVENT).read_bytes() == b"e" * 50


def test_an_index_whose_event_file_is_a_fifo_stays_back(tmp_path: Path) -> None:
    sync, local, remote, _ = _sync(tmp_path)
    (local / EVENT).parent.mkdir(parents=True)
    os.mkfifo(local / EVENT)  # would block a plain open forever
    _write(local, INDEX, b"{}")
    assert sync.sync_once(final=True) == []
    assert not remote.exists() or not any(remote.rglob("*.json"))


def test_the_end_marker_is_never_copied_from_the_script_and_is_written_last(
    tmp_path: Path,
) -> None:
    sync, local, remote, _ = _sync(tmp_path)
    _write(local, "training_job_end.ts", b"early")
    _write(local, EVENT)
    _write(local, INDEX)
    assert sync.sync_once() == [EVENT, INDEX]
    assert not (remote / "training_job_end.ts").exists()
    sync.mark_end()
    assert (remote / "training_job_end.ts").read_bytes() == b""


def test_other_files_wait_until_they_settle_and_changes_go_up_again(tmp_path: Path) -> None:
    sync, local, remote, _ = _sync(tmp_path)
    notes = _write(local, "notes.txt", b"one")
    assert sync.sync_once() == []  # new: wait a pass
    assert sync.sync_once() == ["notes.txt"]
    _write(local, "collections/000000000/worker_0_collections.json", b"{}")
    assert sync.sync_once() == ["collections/000000000/worker_0_collections.json"]
    notes.write_bytes(b"two, longer")
    assert sync.sync_once(final=True) == ["notes.txt"]
    assert (remote / "notes.txt").read_bytes() == b"two, longer"


def test_links_hidden_and_temporary_names_are_never_read(tmp_path: Path) -> None:
    sync, local, remote, _ = _sync(tmp_path)
    secret = _write(tmp_path, "secret/token", b"TOKEN")
    (local / "events").mkdir()
    (local / "events" / "linked.tfevents").symlink_to(secret)
    (local / "collections").symlink_to(secret.parent, target_is_directory=True)
    _write(local, ".hidden", b"h")
    _write(local, f"{EVENT}.tmp", b"half")
    assert sync.sync_once(final=True) == []
    copied = [p.read_bytes() for p in remote.rglob("*") if p.is_file()] if remote.exists() else []
    assert b"TOKEN" not in copied


def test_a_directory_swapped_for_a_link_is_not_followed(tmp_path: Path) -> None:
    sync, local, remote, _ = _sync(tmp_path)
    _write(local, INDEX, b"{}")
    secret = _write(tmp_path, f"secret/{STEP}/{STEP}_worker_0.tfevents", b"TOKEN")
    (local / "events").symlink_to(secret.parent.parent, target_is_directory=True)
    assert sync.sync_once(final=True) == []
    assert not (remote / EVENT).exists() and not (remote / INDEX).exists()


def test_old_index_directories_are_not_listed_again(tmp_path: Path) -> None:
    sync, local, _, _ = _sync(tmp_path)
    _write(local, EVENT)
    _write(local, INDEX)
    old = time.time() - 60
    os.utime(local / "index" / "000000000", (old, old))
    assert sync.sync_once() == [EVENT, INDEX]
    # A file that would go up if its directory were listed again: the directory did not change.
    later = f"index/000000000/{STEP[:-1]}1_worker_0.json"
    os.link(local / INDEX, local / later)  # in place without touching the directory's mtime
    os.utime(local / "index" / "000000000", (old, old))
    _write(local, f"events/{STEP[:-1]}1/{STEP[:-1]}1_worker_0.tfevents")
    assert sync.sync_once() == []
    assert sync.sync_once(final=True) == [
        f"events/{STEP[:-1]}1/{STEP[:-1]}1_worker_0.tfevents",
        later,
    ]


def test_a_pass_looks_at_a_bounded_number_of_entries(tmp_path: Path) -> None:
    sync, local, _, lines = _sync(tmp_path, max_entries=5)
    for i in range(12):
        _write(local, f"collections/000000000/w{i:02d}_collections.json")
    assert len(sync.sync_once()) == 5
    assert lines == ["Debugger output: more than 5 files; the rest wait"]


def test_event_file_of_maps_smdebugs_names() -> None:
    assert event_file_of(INDEX) == EVENT
    assert event_file_of("index/000000000/100_worker_0.json") is None
    assert event_file_of("index/000000000/000000000100_../x.json") is None


def test_the_sidecar_writes_sagemakers_hook_config_and_syncs_while_running(
    tmp_path: Path,
) -> None:
    spec = {
        "debugger_hook_config": {
            "hook_parameters": {"save_interval": 2, "tensorboard_dir": "/opt/ml/output/tb"},
            "collection_configs": {"weights": {"save_histogram": False}},
        },
        "rules": ["vanishing_gradient"],
        "mount_opt_ml": False,
    }
    host = make_host(tmp_path, **spec)
    config = host.context.job.debugger_hook_config
    assert config is not None
    sidecar = DebuggerSidecar(host.context, config)
    sidecar.prepare()
    env = sidecar.environment({})
    written = json.loads(Path(env["SMDEBUG_CONFIG_FILE_PATH"]).read_text())
    local = host.tree.root / "output" / "tensors"
    remote = host.context.layout.output_prefix.rstrip("/") + "/debug-output"
    assert written == {
        "LocalPath": str(local),
        "S3OutputPath": remote,
        "HookParameters": {
            "save_interval": "2",
            "tensorboard_dir": str(host.tree.root / "output/tb"),
        },
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},
            {"CollectionName": "weights", "CollectionParameters": {"save_histogram": "false"}},
        ],
    }
    sidecar.start()
    try:
        _write(local, EVENT)
        _write(local, INDEX)
        mirrored = Path(remote.removeprefix("file://")) / INDEX
        deadline = time.monotonic() + 30
        while not mirrored.exists():  # uploaded while the "script" runs, before finish
            assert time.monotonic() < deadline, "the index never went up while running"
            time.sleep(0.05)
    finally:
        artifacts = sidecar.finish()
    assert [a.name for a in artifacts] == ["debug-output"]
    assert (Path(remote.removeprefix("file://")) / "training_job_end.ts").exists()


@pytest.mark.parametrize("given", ["s3://bucket/base", "s3://bucket/base/"])
def test_a_given_s3_output_path_gets_the_job_and_debug_output_appended(
    tmp_path: Path, given: str
) -> None:
    host = make_host(tmp_path, debugger_hook_config={"s3_output_path": given})
    config = host.context.job.debugger_hook_config
    assert config is not None
    assert config.output_prefix("file:///x/job-1", "job-1") == "s3://bucket/base/job-1/debug-output"


def test_the_sync_to_s3_is_read_back_by_a_trial(
    tmp_path: Path, s3_settings: Settings, s3_bucket: str
) -> None:
    import numpy as np

    from trainops.debugger import create_trial
    from trainops.debugger.format import TensorFileWriter

    local = tmp_path / "tensors"
    uri = f"s3://{s3_bucket}/job-1/debug-output"
    sync = DebugSync(local, uri, store_for(uri, s3_settings), lambda line: None)
    writer = TensorFileWriter(local, "worker_0")
    for step in range(3):
        writer.write_step(step, "TRAIN", step, [("w", np.full((2, 2), step, dtype=np.float32))])
    assert len(sync.sync_once()) == 6  # three event files, then their three index files
    sync.mark_end()
    trial = create_trial(uri, settings=s3_settings)
    assert trial.steps() == [0, 1, 2]
    assert trial.tensor("w").value(2).tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_a_retried_attempt_removes_the_earlier_end_marker(tmp_path: Path) -> None:
    host = make_host(tmp_path, attempt=2, debugger_hook_config={})
    config = host.context.job.debugger_hook_config
    assert config is not None
    sidecar = DebuggerSidecar(host.context, config)
    marker = Path(sidecar.remote.removeprefix("file://")) / "training_job_end.ts"
    marker.parent.mkdir(parents=True)
    marker.write_bytes(b"")  # the first attempt's
    sidecar.prepare()
    assert not marker.exists()
    sidecar.finish()
    assert marker.exists()


class _OrderedStore(FileStore):
    """A real file store that notes when each upload starts and ends (a checker only)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.started: dict[str, int] = {}
        self.ended: dict[str, int] = {}
        self.clock = itertools.count()

    def upload(self, src: Path, uri: str, on_bytes: Any = None, *, verify: Any = None) -> None:
        key = uri.split("/remote/", 1)[1]
        with self.lock:
            self.started[key] = next(self.clock)
        time.sleep(0.001)  # let the other uploading threads run meanwhile
        super().upload(src, uri, on_bytes, verify=verify)
        with self.lock:
            self.ended[key] = next(self.clock)


def test_uploads_run_several_at_once_and_each_index_still_follows_its_event(
    tmp_path: Path,
) -> None:
    local, remote = tmp_path / "tensors", tmp_path / "remote"
    store = _OrderedStore()
    setups: list[str] = []
    sync = DebugSync(
        local,
        remote.as_uri(),
        store,
        print,
        workers=4,
        thread_setup=lambda: setups.append(threading.current_thread().name),
    )
    steps = [f"{step:012d}" for step in range(40)]
    for step in steps:
        _write(local, f"events/{step}/{step}_worker_0.tfevents", step.encode())
        _write(local, f"index/000000000/{step}_worker_0.json", b"{}")
    uploaded = sync.sync_once()
    assert len(uploaded) == 80
    assert len(setups) == 8  # events, then indexes: four uploading threads each, set up
    for step in steps:
        event = f"events/{step}/{step}_worker_0.tfevents"
        index = f"index/000000000/{step}_worker_0.json"
        assert store.ended[event] < store.started[index]
        assert (remote / event).read_bytes() == step.encode()
    overlapping = sum(
        1
        for key in store.started
        if any(
            store.started[other] < store.started[key] < store.ended[other] for other in store.ended
        )
    )
    assert overlapping > 0  # several at once, not one after another
