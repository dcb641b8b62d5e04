"""File-system channels: a shared directory shown at input/data/<channel>, read by a real process
in a namespace like the script's: read-only enforced (EROFS), rw writes through, nothing
copied, nothing in the machine's mount table, and bad directories named clearly."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.channels._support import Host
from tests.agent.channels._views import filesystem_channel, seen_by_script
from trainops import StorageError
from trainops._errors import SpecError
from trainops.agent.channels import FileSystemChannel, open_channel
from trainops.agent.channels._filesystem import NOT_ENFORCED, show_directory


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    directory = tmp_path / "efs" / "dataset"
    (directory / "sub").mkdir(parents=True)
    (directory / "a.bin").write_bytes(os.urandom(5000))
    (directory / "sub" / "b.txt").write_text("hello\n")
    return directory


def _digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in directory.rglob("*")
        if p.is_file()
    }


def _mounts() -> str:
    return Path("/proc/self/mountinfo").read_text(encoding="utf-8")


def test_read_only_by_default_and_writes_are_refused(host: Host, shared: Path) -> None:
    source = open_channel(filesystem_channel(str(shared)), host.context())
    assert isinstance(source, FileSystemChannel)
    source.prepare()
    target = host.data_dir / "train"
    seen = seen_by_script(target, source.binds(), try_write=True)
    assert seen["files"] == _digests(shared)
    assert seen["write"] == errno.EROFS
    assert not (shared / "written-by-the-script").exists()
    assert list(target.iterdir()) == []  # nothing copied; the machine sees an empty directory
    assert str(target) not in _mounts()
    source.close()


def test_rw_writes_through_to_the_directory(host: Host, shared: Path) -> None:
    source = open_channel(filesystem_channel(str(shared), access_mode="rw"), host.context())
    source.prepare()
    assert [b.read_only for b in source.binds()] == [False]
    seen = seen_by_script(host.data_dir / "train", source.binds(), try_write=True)
    assert seen["write"] == "ok"
    assert (shared / "written-by-the-script").read_text() == "x"
    source.close()


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("missing", "does not exist on algo-1"),
        ("a-file", "is not a directory on algo-1"),
    ],
)
def test_a_bad_directory_is_a_clear_error(
    host: Host, tmp_path: Path, path: str, problem: str
) -> None:
    (tmp_path / "a-file").write_text("x")
    source = open_channel(filesystem_channel(str(tmp_path / path)), host.context())
    with pytest.raises(StorageError) as caught:
        source.prepare()
    assert str(caught.value).startswith("channel 'train': file_system.directory_path ")
    assert problem in str(caught.value)
    source.close()


def test_a_relative_directory_is_refused_by_the_spec_and_the_channel(host: Host) -> None:
    with pytest.raises(SpecError, match="directory_path: 'relative/dir' is not absolute"):
        filesystem_channel("relative/dir")
    channel = filesystem_channel("/abs")  # one stored before the spec refused it
    assert channel.file_system is not None
    relative = dataclasses.replace(channel.file_system, directory_path="relative/dir")
    with pytest.raises(StorageError, match="must be an absolute path"):
        open_channel(dataclasses.replace(channel, file_system=relative), host.context()).prepare()


def test_rw_on_a_directory_the_agent_cannot_write_is_refused(shared: Path) -> None:
    # A directory on a read-only mount: not writable even for root. The check runs in a process
    # whose namespace has the directory bound read-only onto itself.
    check = (
        "import sys\n"
        "from trainops.agent.channels._filesystem import checked_directory\n"
        "try:\n"
        "    checked_directory('train', sys.argv[1], writable=True, host='algo-1')\n"
        "except Exception as exc:\n"
        "    print(exc)\n"
    )
    argv = [sys.executable, "-m", "trainops._hostns_exec", "--bind", str(shared), str(shared)]
    argv += ["ro", "--", sys.executable, "-c", check, str(shared)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == (
        f"channel 'train': file_system.directory_path {str(shared)!r} is access_mode rw but "
        "not writable on algo-1"
    )


def test_a_symlink_to_the_directory_is_shown_as_its_target(
    host: Host, shared: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link-to-dataset"
    link.symlink_to(shared)
    source = open_channel(filesystem_channel(str(link)), host.context())
    source.prepare()
    assert [b.source for b in source.binds()] == [shared.resolve()]
    source.close()


def test_without_namespaces_a_link_is_made_and_the_log_says_ro_is_not_enforced(
    host: Host, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainops.agent.channels._filesystem as module

    monkeypatch.setattr(module, "namespaces_available", lambda: False)
    target = host.data_dir / "train"
    ctx = host.context()
    binds = show_directory("train", shared, target, read_only=True, context=ctx)
    assert binds == ()
    assert target.is_symlink() and target.resolve() == shared
    assert host.lines == [NOT_ENFORCED.format(name="train", source=shared)]
    FileSystemChannel(filesystem_channel(str(shared)), ctx).close()
    assert target.is_dir() and not target.is_symlink()
