"""Packing directories into ``.tar.gz`` and extracting archives without escaping the target.

Extraction checks every member first (absolute paths, ``..``, links pointing outside, devices),
so a hostile archive is rejected before a single byte is written.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterable
from pathlib import Path

from trainops._errors import ArchiveError

__all__ = ["pack", "safe_extract"]


def pack(root: Path, dest: Path, files: Iterable[Path] | None = None) -> Path:
    """Write ``root``'s files (or just ``files``, relative to ``root``) to ``dest`` as tar.gz."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    chosen = sorted(files) if files is not None else _walk(root)
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for rel in chosen:
            tar.add(root / rel, arcname=Path(rel).as_posix(), recursive=False)
    os.replace(tmp, dest)
    return dest


def safe_extract(archive: Path, target: Path) -> list[str]:
    """Extract ``archive`` into ``target`` after checking every member; returns member names."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, target, archive)
            tar.extractall(target, members=members, filter="data")
    except tarfile.TarError as exc:
        raise ArchiveError(f"{archive.name}: not a readable tar archive ({exc})") from None
    return [m.name for m in members]


def _walk(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git"))
        base = Path(dirpath)
        for name in sorted(filenames):
            out.append((base / name).relative_to(root))
    return out


def _check_member(member: tarfile.TarInfo, target: Path, archive: Path) -> None:
    where = f"{archive.name}: entry {member.name!r}"
    if member.name.startswith(("/", os.sep)):
        # The "data" filter would quietly strip the slash; an absolute name is hostile, so refuse.
        raise ArchiveError(f"{where} rejected: absolute path")
    try:
        tarfile.data_filter(member, str(target))
    except tarfile.FilterError as exc:
        raise ArchiveError(f"{where} rejected: {_reason(exc)}") from None
    if member.isdev() or member.isfifo():
        raise ArchiveError(f"{where} rejected: device or FIFO entries are not allowed")


def _reason(exc: tarfile.FilterError) -> str:
    if isinstance(exc, tarfile.AbsolutePathError):
        return "absolute path"
    if isinstance(exc, tarfile.OutsideDestinationError):
        return "would be written outside the target directory"
    if isinstance(exc, tarfile.AbsoluteLinkError | tarfile.LinkOutsideDestinationError):
        return "link points outside the target directory"
    return str(exc)
