"""Archives: pack a tree, extract it back, and refuse hostile tarballs before writing anything."""

from __future__ import annotations

import gzip
import io
import re
import stat
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from trainops import ArchiveError
from trainops._errors import ConfigError
from trainops._settings import Settings
from trainops.archive import ArchiveLimits, pack, safe_extract


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


# --- Links that escape through other links (CVE-2025-4517 class) --------------------------------


def _dir(name: str) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, None


def cve_2025_4517_chain(path: Path) -> Path:
    """The public proof of concept's shape: 16 directory symlinks whose expanded path is longer
    than PATH_MAX (so ``os.path.realpath`` gives up resolving them), a link through the chain
    that climbs back out, and a file written through it."""
    component = "d" * 247
    steps = "abcdefghijklmnop"
    entries = []
    current = ""
    for step in steps:
        entries.append(_dir(f"{current}{component}"))
        entries.append(_link(f"{current}{step}", component, tarfile.SYMTYPE))
        current = f"{current}{component}/"
    link_path = "/".join([*steps, "l" * 254])
    entries.append(_link(link_path, "../" * len(steps), tarfile.SYMTYPE))
    entries.append(_link("escape", f"{link_path}/../..", tarfile.SYMTYPE))
    entries.append(_file("escape/escaped.txt", b"pwned"))
    return _archive(path, *entries)


def _outside_files(tmp_path: Path, target: Path) -> list[str]:
    return sorted(
        p.relative_to(tmp_path).as_posix()
        for p in tmp_path.rglob("*")
        if not p.is_relative_to(target) and p.is_file()
    )


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (ArchiveLimits(), "'d+…d+' rejected: name is 1,239 characters; at most 1,024"),
        # With names up to PATH_MAX allowed, the link checks refuse it on their own.
        (ArchiveLimits(max_path_length=4096), "'a/b/c/.*' rejected: its path goes through a symb"),
    ],
)
def test_the_cve_2025_4517_chain_is_refused_and_nothing_lands_outside(
    tmp_path: Path, limits: ArchiveLimits, reason: str
) -> None:
    archive = cve_2025_4517_chain(tmp_path / "evil.tar.gz")
    target = tmp_path / "work" / "code"
    with pytest.raises(ArchiveError, match=rf"evil\.tar\.gz: entry {reason}"):
        safe_extract(archive, target, limits)
    assert list(target.iterdir()) == []
    assert _outside_files(tmp_path, target) == ["evil.tar.gz"]


@pytest.mark.parametrize(
    "links",
    [
        [("q", "."), ("p", "q/..")],  # lexically '.', really the target's parent
        [("a", "b/c"), ("b", "."), ("c", ".."), ("x", "a")],  # via a link resolved later
        [("loop1", "loop2"), ("loop2", "loop1"), ("x", "loop1/y")],
        [("deep", "/".join(["."] * 400 + [".."]))],
    ],
)
def test_links_that_resolve_outside_through_other_links_are_refused(
    tmp_path: Path, links: list[tuple[str, str]]
) -> None:
    archive = _archive(tmp_path / "evil.tar.gz", *(_link(n, t, tarfile.SYMTYPE) for n, t in links))
    target = tmp_path / "t"
    with pytest.raises(ArchiveError, match=r"rejected: (link points outside|too many levels)"):
        safe_extract(archive, target)
    assert list(target.iterdir()) == []


def test_chains_of_links_that_stay_inside_are_kept(tmp_path: Path) -> None:
    archive = _archive(
        tmp_path / "ok.tar.gz",
        _file("data/v1/weights.bin", b"w"),
        _link("data/current", "v1", tarfile.SYMTYPE),
        _link("latest", "data/current", tarfile.SYMTYPE),
        _link("sub/up", "../latest/weights.bin", tarfile.SYMTYPE),
    )
    safe_extract(archive, tmp_path / "t")
    assert (tmp_path / "t" / "sub" / "up").read_bytes() == b"w"


def test_an_existing_symlink_on_disk_is_never_followed(tmp_path: Path) -> None:
    """Whatever the checks upstream, the writer opens every directory with O_NOFOLLOW."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "t"
    target.mkdir()
    (target / "sub").symlink_to(outside)
    archive = _archive(tmp_path / "a.tar.gz", _file("sub/planted.txt", b"x"))
    with pytest.raises(ArchiveError, match="'sub' on its path is a symbolic link"):
        safe_extract(archive, target)
    assert list(outside.iterdir()) == []


def test_a_file_replacing_an_existing_symlink_replaces_the_link_not_its_target(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    target = tmp_path / "t"
    target.mkdir()
    (target / "train.py").symlink_to(victim)
    safe_extract(_archive(tmp_path / "a.tar.gz", _file("train.py", b"new")), target)
    assert victim.read_text() == "precious"
    assert not (target / "train.py").is_symlink()
    assert (target / "train.py").read_bytes() == b"new"


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        ([_link("l", "x", tarfile.SYMTYPE), _file("l/f")], "goes through a symbolic link (l)"),
        ([_file("f"), _file("f/g")], "goes through a file (f)"),
        ([_file("d/x"), _file("d")], "already has a directory there"),
        ([_link("h", "missing", tarfile.LNKTYPE)], "earlier file of the archive"),
        ([_file("x" * 256)], "over 255 bytes"),
        ([_link("l", "", tarfile.SYMTYPE)], "link target must be 1-1,024 characters"),
        ([_link("l", "a/" * 600, tarfile.SYMTYPE)], "link target must be 1-1,024 characters"),
        ([_file("/".join(["abc"] * 300))], "at most 1,024 (limit archive.max_path_length)"),
    ],
)
def test_structural_problems_are_refused(
    tmp_path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]], fragment: str
) -> None:
    archive = _archive(tmp_path / "a.tar.gz", *entries)
    with pytest.raises(ArchiveError, match=re.escape(fragment)):
        safe_extract(archive, tmp_path / "t")
    assert list((tmp_path / "t").iterdir()) == []


def test_modes_lose_setuid_and_group_write(tmp_path: Path) -> None:
    info, data = _file("run.sh", b"#!/bin/sh\n")
    info.mode = 0o6777
    safe_extract(_archive(tmp_path / "a.tar.gz", (info, data)), tmp_path / "t")
    assert stat.S_IMODE((tmp_path / "t" / "run.sh").stat().st_mode) == 0o755


# --- Expansion limits -------------------------------------------------------------------------

MIB = 1024 * 1024


def gzip_bomb(path: Path, members: list[tuple[str, int]]) -> Path:
    """A tar.gz whose members are zeros, built without ever holding or compressing them whole.

    gzip allows concatenated members, so one compressed MiB of zeros (about 1 KB) is written as
    often as needed: 3 MB of archive per 3 GB of data, in milliseconds.
    """
    zeros = gzip.compress(b"\0" * MIB, compresslevel=9)
    with path.open("wb") as out:
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            out.write(gzip.compress(info.tobuf(format=tarfile.PAX_FORMAT)))
            whole, rest = divmod(size, MIB)
            for _ in range(whole):
                out.write(zeros)
            padding = (-size) % 512
            out.write(gzip.compress(b"\0" * (rest + padding)))
        out.write(gzip.compress(b"\0" * 1024))
    return path


def test_a_3_mb_to_3_gb_gzip_bomb_is_refused_at_its_header(tmp_path: Path) -> None:
    archive = gzip_bomb(tmp_path / "bomb.tar.gz", [("zeros.bin", 3 * 1024 * MIB)])
    assert archive.stat().st_size < 4 * MIB
    target = tmp_path / "t"
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError, match=r"bomb\.tar\.gz: entry 'zeros\.bin' rejected"):
            safe_extract(archive, target)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB
    assert list(target.iterdir()) == []


def test_a_bomb_of_many_moderate_files_is_refused_by_the_ratio(tmp_path: Path) -> None:
    members = [(f"part-{i:02d}.bin", 100 * MIB) for i in range(30)]  # 3 GB in 30 files
    archive = gzip_bomb(tmp_path / "bomb.tar.gz", members)
    limits = ArchiveLimits()
    cap = limits.expansion_cap(archive.stat().st_size)
    assert cap < 1024 * MIB
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError, match=rf"expands to more than {cap:,} bytes") as info:
            safe_extract(archive, tmp_path / "t", limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "entry 'part-" in str(info.value)
    assert peak < 16 * MIB
    assert list((tmp_path / "t").iterdir()) == []


def test_per_file_and_total_caps(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "a.tar.gz", _file("a", b"x" * 1000), _file("b", b"y" * 1000))
    with pytest.raises(ArchiveError, match="entry 'a' rejected: 1,000 bytes; one file may have"):
        safe_extract(archive, tmp_path / "t1", ArchiveLimits(max_member_bytes=999))
    with pytest.raises(ArchiveError, match="entry 'b' rejected: the archive expands to more"):
        safe_extract(archive, tmp_path / "t2", ArchiveLimits(max_total_bytes=1500))
    assert safe_extract(archive, tmp_path / "t3", ArchiveLimits(max_total_bytes=2000)) == ["a", "b"]


def test_hard_links_count_as_copies(tmp_path: Path) -> None:
    links = [_link(f"copy-{i}", "big", tarfile.LNKTYPE) for i in range(100)]
    archive = _archive(tmp_path / "a.tar.gz", _file("big", b"z" * 10_000), *links)
    with pytest.raises(ArchiveError, match="entry 'copy-9' rejected: the archive expands"):
        safe_extract(archive, tmp_path / "t", ArchiveLimits(max_total_bytes=100_000))


def many_files(path: Path, count: int) -> Path:
    """A tar.gz of ``count`` empty files, each header patched from one template (fast)."""
    template = bytearray(tarfile.TarInfo("f/000000").tobuf(format=tarfile.USTAR_FORMAT))
    with gzip.open(path, "wb", compresslevel=1) as out:
        for i in range(count):
            template[0:8] = f"f/{i:06d}".encode()
            template[148:156] = b" " * 8  # the checksum counts its own field as spaces
            template[148:156] = b"%06o\0 " % sum(template)
            out.write(template)
        out.write(b"\0" * 1024)
    return path


def test_100000_files_are_refused_past_the_member_cap(tmp_path: Path) -> None:
    archive = many_files(tmp_path / "many.tar.gz", 100_000)
    with pytest.raises(ArchiveError, match=r"entry 'f/020000' rejected: .* more than 20,000"):
        safe_extract(archive, tmp_path / "t")
    assert list((tmp_path / "t").iterdir()) == []
    small = many_files(tmp_path / "small.tar.gz", 101)
    with pytest.raises(ArchiveError, match=r"more than 100 entries \(limit archive\.max_members"):
        safe_extract(small, tmp_path / "t", ArchiveLimits(max_members=100))
    assert len(safe_extract(small, tmp_path / "t", ArchiveLimits(max_members=101))) == 101


def test_a_huge_extended_header_is_not_read_into_memory(tmp_path: Path) -> None:
    info = tarfile.TarInfo("x")
    info.type = tarfile.XHDTYPE  # a PAX header declaring 1 GiB of metadata
    info.size = 1024 * MIB
    path = tmp_path / "pax.tar.gz"
    with path.open("wb") as out:
        out.write(gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT)))
        out.write(gzip.compress(b"\0" * MIB) * 8)
    with pytest.raises(ArchiveError, match=r"pax\.tar\.gz: rejected: a header or read of"):
        safe_extract(path, tmp_path / "t")


def test_a_truncated_archive_is_an_archive_error(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "a.tar.gz", _file("a", b"x" * 100_000))
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(archive.read_bytes()[:60])
    with pytest.raises(ArchiveError, match=r"cut\.tar\.gz: not a readable tar archive"):
        safe_extract(truncated, tmp_path / "t")


@pytest.mark.parametrize("mode", ["w:bz2", "w:xz", "w"])
def test_other_compressions_extract(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "a.tar"
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        info, data = _file("x/y.txt", b"hello")
        tar.addfile(info, io.BytesIO(data or b""))
    safe_extract(path, tmp_path / "t")
    assert (tmp_path / "t" / "x" / "y.txt").read_bytes() == b"hello"


def test_limits_come_from_config_yaml_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("archive:\n  max_members: 50\n  max_ratio: 10\n")
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_ARCHIVE_MAX_MEMBERS": "70"}
    limits = Settings.load(env).archive
    assert (limits.max_members, limits.max_ratio) == (70, 10)
    assert limits.max_total_bytes == ArchiveLimits().max_total_bytes
    (tmp_path / "config.yaml").write_text("archive:\n  max_files: 50\n")
    with pytest.raises(ConfigError, match=r"config\.yaml archive: unknown key\(s\) max_files"):
        Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    with pytest.raises(ConfigError, match="TRAINOPS_ARCHIVE_MAX_RATIO: expected a whole number"):
        Settings.load({"TRAINOPS_HOME": str(tmp_path / "x"), "TRAINOPS_ARCHIVE_MAX_RATIO": "lots"})
