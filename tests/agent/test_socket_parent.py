"""The parent of every job's remote-shell socket directory (``socket_parent``): made private,
a leftover of ours that others may enter mended, one not ours (another user's, a link) refused
with what to do, and two agents making it at once both get it."""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops.agent.supervision._hostns import socket_parent


@pytest.fixture
def parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield tmp_path / f"trainops-rsh-{os.getuid()}"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_it_is_made_private(parent: Path) -> None:
    assert socket_parent() == parent
    assert _mode(parent) == 0o700


def test_a_leftover_others_may_enter_is_made_private_again(parent: Path) -> None:
    parent.mkdir()
    parent.chmod(0o755)  # as an older trainops or a hand-made one under another umask left it
    (parent / "rsh-old").mkdir()
    assert socket_parent() == parent
    assert _mode(parent) == 0o700 and (parent / "rsh-old").is_dir()


def test_a_link_in_its_place_is_refused_and_not_followed(parent: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    parent.symlink_to(elsewhere)
    with pytest.raises(OSError, match=r"is not a directory of this user .*: remove it"):
        socket_parent()
    assert _mode(elsewhere) == 0o755


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a directory to another user")
def test_another_user_s_directory_is_refused(parent: Path) -> None:
    parent.mkdir(mode=0o700)
    os.chown(parent, 4242, 4242)
    with pytest.raises(OSError, match=r"belongs to uid 4242, not to this user \(0\): remove it"):
        socket_parent()


def test_agents_making_it_at_once_all_get_it(parent: Path) -> None:
    found: list[Path | BaseException] = []
    start = threading.Barrier(8)

    def make() -> None:
        start.wait()
        try:
            found.append(socket_parent())
        except OSError as exc:
            found.append(exc)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [parent] * 8
    assert _mode(parent) == 0o700
