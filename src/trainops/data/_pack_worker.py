"""Shards of ``trainops pack``: read their files, write their files, publish, mark them done.

This is what each worker process runs on its share of the shards (and what the packer runs
in-process with one worker). A shard's companions are published before its data file, and its
``.pack`` marker after both, so a marker always means a whole shard.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainops.data._index import ShardInfo
from trainops.data._pack_dest import WORK_DIR, PackDest, open_dest
from trainops.data._pack_formats import FORMATS
from trainops.data._pack_source import SourceFile, SourceReader

__all__ = ["ShardTask", "init_worker", "marker_name", "pack_shards", "run_batch"]

Progress = Callable[[int, int], None]
_REPORT_EVERY = 64
_STAGED = 2  # shards built and not yet published, at most
_queue: Any = None
_stop: Any = None
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


def init_worker(queue: Any, stop: Any) -> None:
    """Pool initializer: progress goes to the parent through ``queue``; ``stop`` is set when
    another worker failed."""
    global _queue, _stop
    _queue, _stop = queue, stop


def run_batch(tasks: list[ShardTask]) -> list[ShardInfo]:
    """The pool's entry point: :func:`pack_shards` reporting to the parent's queue."""
    dest = _dests.get(tasks[0].dest)
    if dest is None:
        dest = _dests[tasks[0].dest] = open_dest(tasks[0].dest)
    return pack_shards(tasks, dest, lambda files, size: _queue.put((files, size)), _stop.is_set)


def pack_shards(
    tasks: list[ShardTask],
    dest: PackDest,
    progress: Progress,
    stopped: Callable[[], bool] = lambda: False,
) -> list[ShardInfo]:
    """Pack shards one after another, each one published (fsync and rename, or upload) on a
    thread while the next is built, so the disk or network works while the CPU does; at most
    ``_STAGED`` shards wait to be published. Returns (in task order) once every shard is
    published; the first failure is raised, after the shards before it are published.
    ``stopped()`` true ends the batch early (another worker failed; its error is the one
    raised)."""
    infos: list[ShardInfo] = []
    with ThreadPoolExecutor(1, thread_name_prefix="trainops-pack-publish") as publisher:
        pending: list[Future[ShardInfo]] = []
        for task in tasks:
            if stopped():
                break
            if len(pending) >= _STAGED:
                infos.append(pending.pop(0).result())
            staging, info = _build(task, dest, progress)
            pending.append(publisher.submit(_publish, task, dest, staging, info))
        infos += [future.result() for future in pending]
    return infos


def _build(task: ShardTask, dest: PackDest, progress: Progress) -> tuple[Path, ShardInfo]:
    """Write one shard's files into a new staging directory."""
    staging = dest.staging()
    try:
        names = FORMATS[task.fmt].files(task.number)
        info = FORMATS[task.fmt].write(staging, names, _records(task, progress), task.float_labels)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging, info


def _publish(task: ShardTask, dest: PackDest, staging: Path, info: ShardInfo) -> ShardInfo:
    """Companions, then the data file, then the marker: a marker always means a whole shard."""
    try:
        data_name, *companions = FORMATS[task.fmt].files(task.number)
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
        data = reader.read(file.key, file.size)
        yield file, data
        files, size = files + 1, size + len(data)
        if files == _REPORT_EVERY:
            progress(files, size)
            files = size = 0
    if files:
        progress(files, size)
