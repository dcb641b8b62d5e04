"""``trainops pack`` end to end: a real directory, round trips, a killed pack resumed,
byte-identical output whatever the worker count, and SeaweedFS as SRC and DEST."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests._support.seaweed import SeaweedS3
from tests.data._tree import make_tree, tree_bytes
from trainops._settings import Settings
from trainops.cli import main
from trainops.data import ShardIndex, ShardReader
from trainops.storage import store_for, upload_tree


def test_pack_prints_one_summary_line_and_no_progress_off_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_tree(tmp_path / "src", {"cat": 20, "dog": 20})
    argv = ["pack", str(tmp_path / "src"), str(tmp_path / "out"), "--shard-size", "16k"]
    assert main([*argv, "--workers", "2"]) == 0
    out, err = capsys.readouterr()
    index = ShardIndex.parse((tmp_path / "out" / "index.json").read_bytes())
    assert out.startswith(f"packed 40 files into {len(index.shards)} shard(s) (shards, ")
    assert out.rstrip().endswith(f"{len(index.shards)} written, 0 kept from an earlier run")
    assert err == ""
    for shard in index.shards:
        with ShardReader.open(tmp_path / "out" / shard.name, sha256=shard.sha256) as reader:
            assert len(reader) == shard.records


def test_the_same_bytes_with_one_worker_or_three(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 60, "b": 60}, seed=3)
    for workers in ("1", "3"):
        argv = ["pack", str(tmp_path / "src"), str(tmp_path / workers), "--format", "recordio"]
        assert main([*argv, "--shard-size", "20KB", "--workers", workers]) == 0
    assert tree_bytes(tmp_path / "1") == tree_bytes(tmp_path / "3")
    assert len(list((tmp_path / "1").glob("*.rec"))) > 3


def test_errors_are_one_line_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["pack", str(tmp_path / "empty"), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == f"trainops: error: SRC {tmp_path / 'empty'} holds no files to pack\n"
    with pytest.raises(SystemExit):
        main(["pack", str(tmp_path / "empty"), str(tmp_path / "out"), "--shard-size", "lots"])
    assert "'lots' is not a size such as 64MiB" in capsys.readouterr().err


def _pack_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainops.cli", "pack", *args]


def _run_pack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_pack_command(*args), capture_output=True, text=True, timeout=240)


def _semaphore_inodes(pid: int) -> set[int]:
    """The POSIX semaphores process ``pid`` has mapped (a spawn pool's locks), by inode: the
    maps name the temporary file glibc made each one as, not its /dev/shm/sem.mp-* name."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {int(line.split()[4]) for line in maps if "/dev/shm/sem." in line}


def _left_in_shm(inodes: set[int]) -> list[str]:
    return [entry.name for entry in os.scandir("/dev/shm") if entry.inode() in inodes]


def _kill_all_but_the_resource_tracker(cli: subprocess.Popen[bytes]) -> None:
    """SIGKILL the CLI, then its workers; multiprocessing's resource tracker is left to unlink
    the semaphores once every process that used them is gone (killed with the rest, as
    ``killpg`` would, it leaves them in /dev/shm for good)."""
    cli.kill()
    cli.wait(timeout=30)
    tracker = None
    for pid in _group_members(cli.pid):
        if b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes():
            tracker = pid
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while tracker is not None and tracker in _group_members(cli.pid):
        assert time.monotonic() < deadline, "the resource tracker did not end"
        time.sleep(0.01)


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(stat.parent.name))
    return members


@pytest.mark.slow
def test_a_killed_pack_resumes_and_ends_byte_identical(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 800, "b": 800}, seed=7, max_size=8000)
    flags = ["--shard-size", "24k", "--workers", "2"]
    reference = _run_pack(str(tmp_path / "src"), str(tmp_path / "ref"), *flags)
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "out"
    killed = subprocess.Popen(
        _pack_command(str(tmp_path / "src"), str(out), *flags),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(list((out / ".pack").glob("part-*.json"))) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    semaphores = _semaphore_inodes(killed.pid)
    assert _left_in_shm(semaphores), "the pack's spawn pool should hold named semaphores"
    _kill_all_but_the_resource_tracker(killed)  # the CLI and its workers, mid-pack
    assert not _left_in_shm(semaphores), "the killed pack left its semaphores in /dev/shm"
    assert not (out / "index.json").exists(), "the pack finished before it could be killed"
    # Whatever carries a final name is whole: every shard there reads back.
    for shard in out.glob("part-*.tops"):
        ShardReader.open(shard).close()
    resumed = _run_pack(str(tmp_path / "src"), str(out), *flags)
    assert resumed.returncode == 0, resumed.stderr
    kept = int(resumed.stdout.rsplit(" written, ", 1)[1].split(" kept")[0])
    assert kept >= 5
    assert tree_bytes(out) == tree_bytes(tmp_path / "ref")


@pytest.mark.slow
@pytest.mark.s3
def test_s3_as_source_and_as_destination(
    tmp_path: Path,
    s3_server: SeaweedS3,
    s3_settings: Settings,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    make_tree(tmp_path / "src", {"cat": 30, "dog": 30}, seed=5)
    store = store_for(f"s3://{s3_bucket}", s3_settings)
    upload_tree(store, tmp_path / "src", f"s3://{s3_bucket}/images")
    flags = ["--format", "tfrecord", "--shard-size", "32k", "--workers", "2"]
    assert main(["pack", str(tmp_path / "src"), str(tmp_path / "local"), *flags]) == 0
    assert main(["pack", f"s3://{s3_bucket}/images", f"s3://{s3_bucket}/packed", *flags]) == 0
    capsys.readouterr()
    objects = store.list_objects(f"s3://{s3_bucket}/packed/")
    remote = {info.key: store.get_bytes(info.uri) for info in objects}
    assert remote == tree_bytes(tmp_path / "local")
    assert main(["pack", f"s3://{s3_bucket}/images", f"s3://{s3_bucket}/images/packed"]) == 2
    assert "overlap: pick a DEST outside SRC" in capsys.readouterr().err
    # Packing again finds the finished pack and writes nothing.
    assert main(["pack", f"s3://{s3_bucket}/images", f"s3://{s3_bucket}/packed", *flags]) == 0
    assert ": 0 written, " in capsys.readouterr().out


def test_a_terminal_gets_a_progress_bar_on_stderr(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 10})
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        done = subprocess.run(
            _pack_command(str(tmp_path / "src"), str(tmp_path / "out"), "--workers", "1"),
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
            timeout=120,
        )
        os.close(terminal)
        shown = _read_all(controller)
    finally:
        os.close(controller)
    assert done.returncode == 0
    assert "packing: 100%" in shown
    assert "packing" not in done.stdout


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
