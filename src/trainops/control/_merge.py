"""Merging the per-host parts of a multi-host job into one model.tar.gz and one output.tar.gz.

Each host uploads ``output/model-parts/<host>.tar.gz`` (and ``output-parts``); the parts are
read one at a time in host order and their members streamed into the merged archive without
being extracted, algo-1 winning a name clash. The parts are deleted only after the merged
archive is in place, so a merge cut short by a crash is simply done again.

A job whose outputs are not compressed (``disable_output_compression``) has each host upload
its files under ``output/model-parts/<host>/`` (and ``data-parts``); they are copied to
``output/model/`` (and ``output/data/``), algo-1 winning a name clash again. What a retried
attempt left there before is removed first, when every host's part is there; the parts are
deleted last host first, so a merge cut short is done again from the hosts that win.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path

from trainops._settings import Settings
from trainops.storage import ObjectInfo, ObjectStore, join_uri, store_for

__all__ = ["FILE_PART_FOLDERS", "PART_FOLDERS", "merge_parts"]

# merged artifact name -> (folder of the parts, merged object name)
PART_FOLDERS = {
    "model": ("model-parts", "model.tar.gz"),
    "output": ("output-parts", "output.tar.gz"),
}


# merged artifact name -> (folder of the hosts' files, folder of the merged files)
FILE_PART_FOLDERS = {
    "model": ("model-parts", "model"),
    "output": ("data-parts", "data"),
}


def merge_parts(
    settings: Settings, output_prefix: str, host_count: int, *, compressed: bool = True
) -> dict[str, str]:
    """Merge every kind of part found under ``output_prefix``; returns artifact name -> URI."""
    store = store_for(output_prefix, settings)
    if not compressed:
        return _merge_files(store, output_prefix, host_count)
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


def _merge_files(store: ObjectStore, output_prefix: str, host_count: int) -> dict[str, str]:
    merged = {}
    for name, (folder, target) in FILE_PART_FOLDERS.items():
        parts_prefix = join_uri(output_prefix, "output", folder)
        final = join_uri(output_prefix, "output", target)
        by_host: dict[str, list[ObjectInfo]] = {}
        for info in store.list_objects(parts_prefix):
            host, _, key = info.key.partition("/")
            if key:
                by_host.setdefault(host, []).append(info)
        hosts = sorted(by_host, key=_host_order)
        if len(hosts) >= host_count:  # a first merge: what an earlier attempt left goes
            for stale in store.list_objects(final):
                store.delete(stale.uri)
        with tempfile.TemporaryDirectory(prefix="trainops-merge-") as tmp:
            seen: set[str] = set()
            for host in hosts:
                for info in by_host[host]:
                    key = info.key.partition("/")[2]
                    if key not in seen and _plain_key(key):
                        seen.add(key)
                        _copy_object(store, info, join_uri(final, key), Path(tmp))
        merged[name] = final + "/"  # as one host's job names it: the prefix, even if empty
        for host in reversed(hosts):  # the winners last: a merge cut short keeps them
            for info in by_host[host]:
                store.delete(info.uri)
    return merged


def _plain_key(key: str) -> bool:
    """Whether ``key`` names a file below the merged folder (a host's file names are the job's
    script's to choose: no ``..``, no empty or ``.`` segment reaches past it)."""
    return all(part not in ("", ".", "..") for part in key.split("/"))


def _copy_object(store: ObjectStore, info: ObjectInfo, target: str, tmp: Path) -> None:
    local = tmp / "object"
    store.download(info.uri, local, expected_size=info.size)
    store.upload(local, target)
    local.unlink()


def _host_order(key: str) -> tuple[int, str]:
    """``algo-2.tar.gz`` before ``algo-10.tar.gz``."""
    stem = key.split("/")[-1].removesuffix(".tar.gz")
    number = stem.rpartition("-")[2]
    return (int(number) if number.isdigit() else 1 << 30, stem)
