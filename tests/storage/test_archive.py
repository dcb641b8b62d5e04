"""Archives: pack a tree, extract it back, and refuse hostile tarballs before writing anything."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from trainops import ArchiveError
from trainops.archive import pack, safe_extract


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _file(name: str, data: bytes = b"data") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str, kind: bytes) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _special(name: str, kind: bytes) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = kind, 1, 3
    return info, None


def _archive(path: Path, *entries: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def test_pack_and_extract_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    files = {"train.py": b"print(1)\n", "pkg/__init__.py": b"", "pkg/data/x.json": b"{}"}
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"junk")
    archive = pack(src, tmp_path / "out" / "sourcedir.tar.gz")
    names = safe_extract(archive, tmp_path / "code")
    assert sorted(names) == sorted(files)
    assert _tree(tmp_path / "code") == files
    assert not list((tmp_path / "out").glob("*.part"))


def test_pack_of_chosen_files_only(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.pt").write_bytes(b"m")
    (src / "scratch.tmp").write_bytes(b"s")
    archive = pack(src, tmp_path / "model.tar.gz", files=[Path("model.pt")])
    assert safe_extract(archive, tmp_path / "x") == ["model.pt"]


def test_links_inside_the_target_are_kept(tmp_path: Path) -> None:
    archive = _archive(
        tmp_path / "ok.tar.gz",
        _file("data/real.txt", b"real"),
        _link("alias.txt", "data/real.txt", tarfile.SYMTYPE),
        _link("hard.txt", "data/real.txt", tarfile.LNKTYPE),
    )
    safe_extract(archive, tmp_path / "t")
    assert (tmp_path / "t" / "alias.txt").read_bytes() == b"real"
    assert (tmp_path / "t" / "hard.txt").read_bytes() == b"real"


HOSTILE: dict[str, Callable[[], tuple[tarfile.TarInfo, bytes | None]]] = {
    "absolute path": lambda: _file("/tmp/trainops-absolute-escape.txt"),
    "parent escape": lambda: _file("../escape.txt"),
    "nested parent escape": lambda: _file("a/../../escape.txt"),
    "symlink to an absolute path": lambda: _link("link", "/etc/passwd", tarfile.SYMTYPE),
    "symlink pointing outside": lambda: _link("link", "../../outside", tarfile.SYMTYPE),
    "hardlink pointing outside": lambda: _link("hard", "../outside.txt", tarfile.LNKTYPE),
    "hardlink to an absolute path": lambda: _link("hard", "/etc/passwd", tarfile.LNKTYPE),
    "character device": lambda: _special("null", tarfile.CHRTYPE),
    "block device": lambda: _special("disk", tarfile.BLKTYPE),
    "fifo": lambda: _special("pipe", tarfile.FIFOTYPE),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_entries_are_rejected_before_anything_is_written(tmp_path: Path, kind: str) -> None:
    (tmp_path / "outside.txt").write_text("precious")
    archive = _archive(tmp_path / "evil.tar.gz", _file("first.txt", b"harmless"), HOSTILE[kind]())
    target = tmp_path / "work" / "code"
    with pytest.raises(ArchiveError, match=r"evil\.tar\.gz: entry .* rejected"):
        safe_extract(archive, target)
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar.gz", "outside.txt", "work"]
    assert (tmp_path / "outside.txt").read_text() == "precious"
    assert not Path("/tmp/trainops-absolute-escape.txt").exists()


def test_a_file_that_is_not_an_archive_is_an_archive_error(tmp_path: Path) -> None:
    bogus = tmp_path / "sourcedir.tar.gz"
    bogus.write_bytes(b"this is not a tarball")
    with pytest.raises(ArchiveError, match="not a readable tar archive"):
        safe_extract(bogus, tmp_path / "code")
