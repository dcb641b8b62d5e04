"""``trainops pack``: many small files into shards of a target size, in parallel, resumable.

The plan is fixed before any byte is read: files in SRC order (sorted paths, or the ``.lst``'s
order) are cut into shards at the target size, from the listed sizes alone (a local SRC lists a
sample of them, and the others count as the sample's mean: statting every file would cost more
than a worker takes to read it). Each shard is then
one task, claimed by whichever process is free (``_pool``), so the output is
byte-identical whatever the worker count.
DEST holds the configuration of an unfinished pack (``_dest``): re-running the same
command keeps the finished shards and packs the rest; a different configuration is refused.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.data.packer._dest import PackDest, open_dest
from trainops.data.packer._formats import FORMATS
from trainops.data.packer._pool import PackPool
from trainops.data.packer._progress import ProgressBar
from trainops.data.packer._resume import existing_index, resume
from trainops.data.packer._source import (
    PackError,
    Source,
    SourceFile,
    SourceFiles,
    list_source,
    local_path,
)
from trainops.data.packer._worker import ShardTask
from trainops.data.shards._index import INDEX_NAME, ShardIndex, ShardInfo

__all__ = ["PackOptions", "PackResult", "pack", "plan_shards"]

PACKER_VERSION = 2  # 2: a local SRC's plan counts unlisted sizes as the sample's mean
_RECORD_OVERHEAD = 64  # framing, IRHeader and the like, counted toward the shard size


@dataclass(frozen=True, slots=True)
class PackOptions:
    """How to pack: output ``format``, target ``shard_size`` in bytes, worker processes,
    an im2rec ``.lst`` for labels (else class folders), and whether to draw a progress bar."""

    format: str = "shards"
    shard_size: int = 64 << 20
    workers: int = 1
    labels: Path | None = None
    progress: bool = False


@dataclass(frozen=True, slots=True)
class PackResult:
    """The dataset's index, and how many shards this run wrote and kept from an earlier one."""

    index: ShardIndex
    location: str
    written: int = 0
    kept: int = 0
    config: dict[str, Any] = field(default_factory=dict)


def plan_shards(
    files: Sequence[SourceFile], shard_size: int, estimate: int = 0
) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of ``files``: a new shard starts where the next file would
    take the current one past ``shard_size`` (a file bigger than that gets a shard alone); a
    file of unknown size (-1) counts as ``estimate`` bytes."""
    ranges, start, used = [], 0, 0
    for i, listed in enumerate(SourceFiles.of(files).sizes):
        size = (listed if listed >= 0 else estimate) + _RECORD_OVERHEAD
        if i > start and used + size > shard_size:
            ranges.append((start, i))
            start, used = i, 0
        used += size
    ranges.append((start, len(files)))
    return ranges


def pack(src: str, dest: str, options: PackOptions) -> PackResult:
    """Pack SRC into DEST; returns at once if DEST already holds this very pack."""
    _check_options(options)
    with _gc_paused(), PackPool(options.workers - 1, options.progress) as pool:
        return _pack(src, dest, options, pool)  # the helpers start while SRC is listed


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while packing: listing 200,000 files makes as many tuples,
    and every full collection walked all of them again (0.2 s of CPU per 200,000 files, all
    of it before the first shard). The few cycles packing leaves (futures, a traceback) are
    collected once it is back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pack(src: str, dest: str, options: PackOptions, pool: PackPool) -> PackResult:
    source = list_source(src, options.labels)
    _check_apart(source, dest)
    plan = plan_shards(source.files, options.shard_size, source.size_estimate)
    config = _config(source, options, len(plan))
    target = open_dest(dest)
    existing = existing_index(target, config)
    if existing is not None:
        target.finish()
        return PackResult(existing, target.location, 0, len(plan), config)
    done = resume(target, config, plan)
    todo = [_task(dest, source, config, plan, n) for n in range(len(plan)) if n not in done]
    done.update(_run(target, todo, options, source, pool))
    shards = tuple(done[n] for n in range(len(plan)))
    index = ShardIndex(shards, FORMATS[options.format].index_format, config=config)
    target.write(INDEX_NAME, index.to_json().encode())
    target.finish()
    return PackResult(index, target.location, len(todo), len(plan) - len(todo), config)


def _check_options(options: PackOptions) -> None:
    FORMATS.lookup(options.format, where="--format: ")
    if options.shard_size < 1:
        raise PackError(f"--shard-size must be at least 1 byte, not {options.shard_size}")
    if options.workers < 1:
        raise PackError(f"--workers must be 1 or more, not {options.workers}")


def _check_apart(source: Source, dest: str) -> None:
    """DEST may not be SRC, nor lie inside it, nor hold it (a re-run would list the shards)."""
    root = local_path(dest)
    if root is not None and "://" not in source.location:
        here, there = Path(source.location), root.resolve()
        overlap = here == there or here in there.parents or there in here.parents
    else:
        here_uri, there_uri = source.location.rstrip("/") + "/", dest.rstrip("/") + "/"
        overlap = here_uri.startswith(there_uri) or there_uri.startswith(here_uri)
    if overlap:
        raise PackError(f"DEST {dest} and SRC {source.location} overlap: pick a DEST outside SRC")


def _float_labels(source: Source, options: PackOptions) -> bool:
    if options.labels is None:
        return False  # folder labels are whole numbers
    return any(not label.is_integer() for labels in source.files.labels for label in labels)


def _config(source: Source, options: PackOptions, shards: int) -> dict[str, Any]:
    return {
        "packer": PACKER_VERSION,
        "format": options.format,
        "shard_size": options.shard_size,
        "labels": "lst" if options.labels is not None else "folders",
        "float_labels": _float_labels(source, options),
        "classes": list(source.classes),
        "source": source.fingerprint(),
        "files": len(source.files),
        "bytes": source.total_bytes,
        "shards": shards,
    }


def _task(
    dest: str, source: Source, config: dict[str, Any], plan: list[tuple[int, int]], number: int
) -> ShardTask:
    start, end = plan[number]
    files = source.files[start:end]
    return ShardTask(dest, source.location, config["format"], number, files, config["float_labels"])


def _run(
    target: PackDest, todo: list[ShardTask], options: PackOptions, source: Source, pool: PackPool
) -> dict[int, ShardInfo]:
    total, estimate = source.total_bytes, source.size_estimate
    kept = 0
    if options.progress:
        todo_sizes = (size for task in todo for size in SourceFiles.of(task.files).sizes)
        kept = total - sum(size if size >= 0 else estimate for size in todo_sizes)
    with ProgressBar(options.progress, total, kept) as advance:
        return pool.run(todo, target, advance if options.progress else None)


def default_workers() -> int:
    """One worker per CPU this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
