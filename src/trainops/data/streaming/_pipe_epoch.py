"""One epoch of a :class:`StreamingDataset` read from a Pipe channel's FIFO.

The host's sequence is the records of the shards in the order the agent streams them (its
``shuffle_seed`` permutes the objects and ``ShardedByKey`` gives each host its own share; see
docs/data-pipe.md). Each window of ``shuffle_window`` records is held in memory and emitted
permuted, exactly as :mod:`_indexed_epoch` permutes a window of an indexed dataset; by default a
window is 256 MiB of records. Resuming
at position ``p`` passes over the whole shards before ``p``'s window without parsing them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from trainops.data.pipe._channel import PipeChannel
from trainops.data.pipe._shards import StreamedShard, stream_shards
from trainops.data.streaming._shuffle import Windows, default_window

__all__ = ["PIPE_WINDOW_BYTES", "Shuffle", "pipe_units", "read_pipe_units"]

Unit = tuple[int, list[memoryview]]


# A Pipe channel's window is held in memory: by default, records of this many bytes (the first
# shard's average record size says how many).
PIPE_WINDOW_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class Shuffle:
    """The windows' key, whether to permute them, and their size (None: by the data)."""

    key: tuple[object, ...]
    shuffle: bool
    window: int | None

    def windows(self, first: StreamedShard | None) -> Windows:
        size = self.window
        if size is None:
            average = len(first.data) / max(first.records, 1) if first else 1.0
            size = default_window(average, PIPE_WINDOW_BYTES)
        return Windows(size, self.key, shuffle=self.shuffle)


def pipe_units(
    channel: PipeChannel, shuffle: Shuffle, *, start: int, unit: int, max_shard_bytes: int
) -> Iterator[Unit]:
    """The next epoch of ``channel`` (its next FIFO), from position ``start`` on."""
    fifo = channel.claim()
    with channel.open(fifo) as stream:
        label = channel.label(fifo)
        shards = stream_shards(
            stream, label=label, wrapped=channel.wrapped, max_shard_bytes=max_shard_bytes
        )
        first = next(shards, None)
        windows = shuffle.windows(first)
        rest = shards if first is None else itertools.chain([first], shards)
        yield from read_pipe_units(rest, windows, start=start, unit=unit)


def read_pipe_units(
    shards: Iterator[StreamedShard], windows: Windows, *, start: int, unit: int
) -> Iterator[Unit]:
    """Units of ``unit`` records from position ``start`` on, each ``(stop position, records)``."""
    size = windows.size
    k = start // size
    feed = _records(shards, skip=k * size)
    position, pending = start, []
    while window := list(islice(feed, size)):
        order = windows.order(k, len(window))
        for o in order[position - k * size :]:
            pending.append(window[o])
            position += 1
            if len(pending) == unit:
                yield position, pending
                pending = []
        if len(window) < size:
            break
        k += 1
    if pending:
        yield position, pending


def _records(shards: Iterator[StreamedShard], *, skip: int) -> Iterator[memoryview]:
    for shard in shards:
        if skip >= shard.records:
            skip -= shard.records
            continue
        reader = shard.reader()
        yield from reader.block(skip, len(reader))
        skip = 0
