"""Packing directories into ``.tar.gz`` and extracting untrusted archives inside their target.

Extraction does not rely on ``tarfile``'s extraction filters (whose link checks were bypassable
before Python 3.11.13, 3.12.11 and 3.13.4, CVE-2025-4517): :func:`plan_extraction` checks every
header and resolves every link first, so a hostile archive is refused before anything is
written, and :class:`TreeWriter` then creates the entries without following any link. The
decompressed stream is itself bounded, so neither a gzip bomb nor a huge metadata header can
make extraction read without limit.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import IO, cast

from trainops._errors import ArchiveError
from trainops.archive._limits import ArchiveLimits

__all__ = ["pack", "safe_extract"]


def pack(
    root: Path,
    dest: Path,
    files: Iterable[Path] | None = None,
    *,
    exclude: Iterable[Path] = (),
) -> Path:
    """Write ``root``'s files (or just ``files``, relative to ``root``) to ``dest`` as tar.gz,
    leaving out the folders in ``exclude`` (wherever they are; only those under ``root``
    matter)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    chosen = sorted(files) if files is not None else _walk(root, _inside(root, exclude))
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for rel in chosen:
            tar.add(root / rel, arcname=Path(rel).as_posix(), recursive=False)
    os.replace(tmp, dest)
    return dest


def load_extraction() -> None:
    """Import what :func:`safe_extract` imports on its first call, now: for a process that
    forks extracting children (the agent fork server), so that no child pays for the imports
    (a few milliseconds each, more where bytecode is not cached)."""
    import gzip  # noqa: F401
    import lzma  # noqa: F401
    import zlib  # noqa: F401

    import trainops.archive._plan
    import trainops.archive._stream
    import trainops.archive._write  # noqa: F401


def safe_extract(archive: Path, target: Path, limits: ArchiveLimits | None = None) -> list[str]:
    """Extract ``archive`` into ``target`` after checking every member; returns member names.

    Raises :class:`ArchiveError` naming the archive and the entry at fault when an entry would
    land outside ``target``, is a device or FIFO, or when the archive exceeds ``limits``.
    """
    # Imported here: packing (every `trainops run`) needs none of the extraction machinery.
    import gzip
    import lzma
    import zlib

    from trainops.archive._plan import plan_extraction
    from trainops.archive._stream import BoundedReader, open_decompressed
    from trainops.archive._write import TreeWriter
    # (load_extraction imports these same modules: keep the two lists alike.)

    limits = limits or ArchiveLimits()
    target.mkdir(parents=True, exist_ok=True)
    size = archive.stat().st_size
    try:
        with (
            BoundedReader(open_decompressed(archive), archive.name, limits, size) as stream,
            tarfile.open(fileobj=cast("IO[bytes]", stream), mode="r:") as tar,
        ):
            plan = plan_extraction(tar, archive.name, size, limits)
            with TreeWriter(target, archive.name) as writer:
                for entry in plan.entries:
                    writer.write(entry, tar)
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{archive.name}: not a readable tar archive ({exc})") from None
    except OSError as exc:
        if exc.errno is not None:
            raise  # the disk, not the archive
        # bz2 reports corrupt data as a bare OSError("Invalid data stream").
        raise ArchiveError(f"{archive.name}: not a readable tar archive ({exc})") from None
    return [entry.member.name for entry in plan.entries]


def _inside(root: Path, exclude: Iterable[Path]) -> AbstractSet[Path]:
    """The folders of ``exclude`` that lie under ``root``, relative to it (resolved once)."""
    base = root.resolve()
    return {p.resolve().relative_to(base) for p in exclude if p.resolve().is_relative_to(base)}


def _walk(root: Path, skipped: AbstractSet[Path] = frozenset()) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        rel = base.relative_to(root)
        dirnames[:] = sorted(
            d for d in dirnames if d not in ("__pycache__", ".git") and rel / d not in skipped
        )
        for name in sorted(filenames):
            out.append((base / name).relative_to(root))
    return out
