"""Shards of ``trainops pack``: read their files, write their files, publish, mark them done.

This is what the packer runs in-process, and what each helper process runs on the shards it
claims (``_pool``). A shard's companions are published before its data file, and its
``.pack`` marker after both, so a marker always means a whole shard.

A :class:`ShardTask` pickles compactly (its files' paths as one string, their ids, sizes and
label rows as arrays): pickling 200,000 ``SourceFile`` tuples one by one took the parent
longer than a helper takes to pack a shard.
"""

from __future__ import annotations

import gc
import json
import pickle
import shutil
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from trainops.data.packer._dest import WORK_DIR, PackDest, open_dest
from trainops.data.packer._formats import FORMATS
from trainops.data.packer._source import SourceFile, SourceFiles, SourceReader
from trainops.data.shards._index import ShardInfo

__all__ = [
    "ShardTask",
    "claimed",
    "init_worker",
    "marker_name",
    "pack_shards",
    "run_claimed",
    "warm",
]

Progress = Callable[[int, int], None]
_REPORT_EVERY = 64
_STAGED = 2  # shards built and not yet published, at most
_SEPARATOR = "\0"  # never in a local path; a store key holding one is pickled as a tuple
_queue: Any = None
_stop: Any = None
_next: Any = None
_dests: dict[str, PackDest] = {}


@dataclass(frozen=True, slots=True)
class ShardTask:
    """Everything a worker needs to write shard ``number`` (it pickles)."""

    dest: str
    location: str
    fmt: str
    number: int
    files: Sequence[SourceFile]
    float_labels: bool

    def __reduce__(self) -> tuple[Any, ...]:
        head = (self.dest, self.location, self.fmt, self.number, self.float_labels)
        return (_task_from, (*head, *_encode_files(self.files)))


def _encode_files(files: Sequence[SourceFile]) -> tuple[Any, ...]:
    """Ids and sizes as arrays, paths as one string, and labels as a table of the distinct
    labels tuples with each file's row in it (folder labels are a few shared tuples; tuples
    are told apart by identity, as ``0.0`` and ``-0.0`` are equal but not the same label)."""
    columns = SourceFiles.of(files)
    keys, labels = columns.keys, columns.labels
    joined: str | tuple[str, ...] = _SEPARATOR.join(keys)
    if joined.count(_SEPARATOR) != max(len(keys) - 1, 0):
        joined = tuple(keys)
    distinct = dict(zip(map(id, labels), labels, strict=True))
    rows = {identity: row for row, identity in enumerate(distinct)}
    index = array("I", map(rows.__getitem__, map(id, labels)))
    table = tuple(distinct.values())
    return array("Q", columns.ids), table, index, joined, array("q", columns.sizes)


def _decode_files(
    ids: array[int],
    table: tuple[tuple[float, ...], ...],
    index: array[int],
    joined: str | tuple[str, ...],
    sizes: array[int],
) -> SourceFiles:
    keys = joined.split(_SEPARATOR) if isinstance(joined, str) and ids else joined
    return SourceFiles(ids, list(map(table.__getitem__, index)), keys, sizes)


def _task_from(
    dest: str, location: str, fmt: str, number: int, float_labels: bool, *files: Any
) -> ShardTask:
    return ShardTask(dest, location, fmt, number, _decode_files(*files), float_labels)


def marker_name(number: int) -> str:
    return f"{WORK_DIR}/part-{number:05d}.json"


def init_worker(queue: Any, stop: Any, next_task: Any) -> None:
    """Pool initializer: progress goes to the parent through ``queue`` (None: no progress bar,
    nothing to send); ``stop`` is set when another process failed; ``next_task`` is the shared
    counter tasks are claimed from. The helper runs without cyclic garbage collection, as the
    parent packs (``_pack._gc_paused``)."""
    global _queue, _stop, _next
    _queue, _stop, _next = queue, stop, next_task
    gc.disable()


def warm() -> None:
    """Submitted once per helper as the pack starts: spawns it (and imports this module)
    while the parent lists SRC."""


def claim(counter: Any) -> int:
    """The next unclaimed task's position, from a shared ``multiprocessing.Value``."""
    with counter.get_lock():
        position: int = counter.value
        counter.value = position + 1
    return position


def claimed(count: int, counter: Any) -> Iterator[int]:
    """The positions (among ``count`` tasks) this process claims from ``counter``, one at a
    time, until none is left."""
    while (position := claim(counter)) < count:
        yield position


def run_claimed(pickled: list[bytes]) -> dict[int, ShardInfo]:
    """A helper's entry point: :func:`pack_shards` on the tasks it claims (each pickled on
    its own, so that only those are decoded), reporting to the parent's queue."""
    positions = claimed(len(pickled), _next)
    tasks = (pickle.loads(pickled[position]) for position in positions)  # noqa: S301 (from our parent)
    first = next(tasks, None)
    if first is None:
        return {}
    dest = _dests.get(first.dest)
    if dest is None:
        dest = _dests[first.dest] = open_dest(first.dest)
    progress = None if _queue is None else _to_queue
    return pack_shards(chain([first], tasks), dest, progress, _stop.is_set)


def _to_queue(files: int, size: int) -> None:
    _queue.put((files, size))


def pack_shards(
    tasks: Iterable[ShardTask],
    dest: PackDest,
    progress: Progress | None,
    stopped: Callable[[], bool] = lambda: False,
) -> dict[int, ShardInfo]:
    """Pack shards one after another, each one published (fsync and rename, or upload) on a
    thread while the next is built, so the disk or network works while the CPU does; at most
    ``_STAGED`` shards wait to be published. ``progress(files, bytes)`` hears of the files
    read (None: nobody listens, nothing is counted). Returns (shard number -> info) once every
    shard is published; the first failure is raised, after the shards before it are published.
    ``stopped()`` true ends the batch early (another process failed; its error is the one
    raised)."""
    infos: dict[int, ShardInfo] = {}
    with ThreadPoolExecutor(1, thread_name_prefix="trainops-pack-publish") as publisher:
        pending: list[tuple[int, Future[ShardInfo]]] = []
        for task in tasks:
            if stopped():
                break
            if len(pending) >= _STAGED:
                number, future = pending.pop(0)
                infos[number] = future.result()
            staging, info = _build(task, dest, progress)
            pending.append((task.number, publisher.submit(_publish, task, dest, staging, info)))
        infos.update((number, future.result()) for number, future in pending)
    return infos


def _build(task: ShardTask, dest: PackDest, progress: Progress | None) -> tuple[Path, ShardInfo]:
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


def _records(task: ShardTask, progress: Progress | None) -> Iterator[tuple[SourceFile, bytes]]:
    with SourceReader(task.location) as reader:
        read = reader.read
        if progress is None:
            for file in task.files:
                yield file, read(file.key, file.size)
            return
        files = size = 0
        for file in task.files:
            data = read(file.key, file.size)
            yield file, data
            files, size = files + 1, size + len(data)
            if files == _REPORT_EVERY:
                progress(files, size)
                files = size = 0
        if files:
            progress(files, size)
