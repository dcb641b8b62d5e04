"""One shard of ``trainops pack``: read its files, write its files, publish, mark it done.

This is what each worker process runs (and what the packer runs in-process with one worker).
A shard's companions are published before its data file, and its ``.pack`` marker after
both, so a marker always means a whole shard.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from trainops.data._index import ShardInfo
from trainops.data._pack_dest import WORK_DIR, PackDest, open_dest
from trainops.data._pack_formats import FORMATS
from trainops.data._pack_source import SourceFile, SourceReader

__all__ = ["ShardTask", "init_worker", "marker_name", "pack_shard", "run_task"]

Progress = Callable[[int, int], None]
_REPORT_EVERY = 64
_queue: Any = None
_dests: dict[str, PackDest] = {}


@dataclass(frozen=True, slots=True)
class ShardTask:
    """Everything a worker needs to write shard ``number`` (it pickles)."""

    dest: str
    location: str
    fmt: str
    number: int
    files: tuple[SourceFile, ...]
    float_labels: bool


def marker_name(number: int) -> str:
    return f"{WORK_DIR}/part-{number:05d}.json"


def init_worker(queue: Any) -> None:
    """Pool initializer: progress goes to the parent through ``queue``."""
    global _queue
    _queue = queue


def run_task(task: ShardTask) -> ShardInfo:
    """The pool's entry point: :func:`pack_shard` reporting to the parent's queue."""
    dest = _dests.get(task.dest)
    if dest is None:
        dest = _dests[task.dest] = open_dest(task.dest)
    return pack_shard(task, dest, lambda files, size: _queue.put((files, size)))


def pack_shard(task: ShardTask, dest: PackDest, progress: Progress) -> ShardInfo:
    staging = dest.staging()
    try:
        records = _records(task, progress)
        names = FORMATS[task.fmt].files(task.number)
        info = FORMATS[task.fmt].write(staging, names, records, task.float_labels)
        data_name, *companions = names
        for name in [*companions, data_name]:
            dest.publish(staging / name, name)
        dest.write(marker_name(task.number), json.dumps(asdict(info)).encode())
        return info
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _records(task: ShardTask, progress: Progress) -> Iterator[tuple[SourceFile, bytes]]:
    reader = SourceReader(task.location)
    files = size = 0
    for file in task.files:
        yield file, reader.read(file.key, file.size)
        files, size = files + 1, size + file.size
        if files == _REPORT_EVERY:
            progress(files, size)
            files = size = 0
    if files:
        progress(files, size)
