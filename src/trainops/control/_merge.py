"""Merging the per-host parts of a multi-host job into one model.tar.gz and one output.tar.gz.

Each host uploads ``output/model-parts/<host>.tar.gz`` (and ``output-parts``); the parts are
read one at a time in host order and their members streamed into the merged archive without
being extracted, algo-1 winning a name clash. The parts are deleted only after the merged
archive is in place, so a merge cut short by a crash is simply done again.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path

from trainops._settings import Settings
from trainops.storage import ObjectInfo, ObjectStore, join_uri, store_for

__all__ = ["PART_FOLDERS", "merge_parts"]

# merged artifact name -> (folder of the parts, merged object name)
PART_FOLDERS = {
    "model": ("model-parts", "model.tar.gz"),
    "output": ("output-parts", "output.tar.gz"),
}


def merge_parts(settings: Settings, output_prefix: str, host_count: int) -> dict[str, str]:
    """Merge every kind of part found under ``output_prefix``; returns artifact name -> URI."""
    store = store_for(output_prefix, settings)
    merged = {}
    for name, (folder, target) in PART_FOLDERS.items():
        parts_prefix = join_uri(output_prefix, "output", folder)
        final = join_uri(output_prefix, "output", target)
        parts = sorted(store.list_objects(parts_prefix), key=lambda p: _host_order(p.key))
        if len(parts) < host_count and store.exists(final):
            # An earlier merge finished (and had begun deleting the parts, or deleted them all).
            merged[name] = final
        elif parts:
            _merge(store, parts, final)
            merged[name] = final
        for part in parts:
            store.delete(part.uri)
    return merged


def _merge(store: ObjectStore, parts: list[ObjectInfo], final: str) -> None:
    with tempfile.TemporaryDirectory(prefix="trainops-merge-") as tmp:
        out = Path(tmp) / "merged.tar.gz"
        seen: set[str] = set()
        with tarfile.open(out, "w:gz", compresslevel=6) as dst:
            for part in parts:
                local = Path(tmp) / "part.tar.gz"
                store.download(part.uri, local, expected_size=part.size)
                _copy_members(local, dst, seen)
                local.unlink()
        store.upload(out, final)


def _copy_members(part: Path, dst: tarfile.TarFile, seen: set[str]) -> None:
    with tarfile.open(part, "r|gz") as src:
        for member in src:
            key = os.path.normpath(member.name)
            if key in seen or not (member.isfile() or member.isdir() or member.issym()):
                continue
            seen.add(key)
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)


def _host_order(key: str) -> tuple[int, str]:
    """``algo-2.tar.gz`` before ``algo-10.tar.gz``."""
    stem = key.split("/")[-1].removesuffix(".tar.gz")
    number = stem.rpartition("-")[2]
    return (int(number) if number.isdigit() else 1 << 30, stem)
