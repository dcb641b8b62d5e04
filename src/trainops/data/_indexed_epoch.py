"""One rank's epoch over shards that can be opened at will (a folder or object storage).

:class:`EpochPlan` says which record sits at each position of the rank's sequence: the shards
in the epoch's order (permuted by ``(seed, epoch)`` when shuffling), the rank's contiguous run
of that order (:mod:`_partition`), and each window of ``shuffle_window`` positions permuted by
itself (:mod:`_shuffle`). Finding the record at a position costs a window lookup and a binary
search over shard starts, so an epoch can begin at any position without replaying the ones
before it. :func:`read_units` reads this worker's units of positions, keeping open only the
shards of the window being read and the next, and asking the source to fetch the ones after.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate

from trainops.data._index import ShardIndex
from trainops.data._partition import Placement, rank_length, worker_units
from trainops.data._shard_source import ShardSource
from trainops.data._shards import ShardReader
from trainops.data._shuffle import Windows, permutation

__all__ = ["EpochPlan", "read_units"]

Unit = tuple[int, list[memoryview]]


class EpochPlan:
    """Positions ``0 .. length-1`` of rank ``place.rank``'s epoch ``epoch``."""

    def __init__(
        self,
        index: ShardIndex,
        place: Placement,
        *,
        seed: int,
        epoch: int,
        shuffle: bool,
        window: int,
        drop_last: bool,
    ) -> None:
        count = len(index.shards)
        self.order = permutation(count, seed, epoch, "shards") if shuffle else list(range(count))
        self.starts = list(accumulate((index.shards[k].records for k in self.order), initial=0))
        self.total = self.starts[-1]
        self.length = rank_length(self.total, place.world, drop_last=drop_last)
        self.offset = place.rank * self.length
        self.windows = Windows(window, (seed, epoch, place.rank, "records"), shuffle=shuffle)

    def locate(self, q: int) -> tuple[int, int]:
        """``(shard, record)`` shown at position ``q``."""
        g = (self.offset + self.windows.source(q, self.length)) % self.total
        slot = bisect_right(self.starts, g) - 1
        return self.order[slot], g - self.starts[slot]

    def window_shards(self, k: int) -> list[int]:
        """The shards under window ``k``, in sequence order (none past the end)."""
        lo = k * self.windows.size
        hi = min(lo + self.windows.size, self.length)
        if lo >= hi:
            return []
        first = (self.offset + lo) % self.total
        span = hi - lo
        found: list[int] = []
        while span > 0:
            slot = bisect_right(self.starts, first) - 1
            run = min(span, self.total - first)
            last = bisect_right(self.starts, first + run - 1) - 1
            found += [
                self.order[s] for s in range(slot, last + 1) if self.starts[s + 1] > self.starts[s]
            ]
            span -= run
            first = 0
        return list(dict.fromkeys(found))


class _OpenShards:
    """The shards being read, each as (records' bytes, offsets, offset of the first record)."""

    def __init__(self, source: ShardSource) -> None:
        self._source = source
        self._open: dict[int, tuple[memoryview, list[int]]] = {}
        self._readers: dict[int, ShardReader] = {}

    def record(self, shard: int, i: int) -> memoryview:
        entry = self._open.get(shard)
        if entry is None:
            entry = self._load(shard)
        data, bounds = entry
        return data[bounds[i] : bounds[i + 1]]

    def keep_only(self, shards: set[int]) -> None:
        for shard in [s for s in self._open if s not in shards]:
            del self._open[shard]
            self._readers.pop(shard).close()

    def __contains__(self, shard: int) -> bool:
        return shard in self._open

    def _load(self, shard: int) -> tuple[memoryview, list[int]]:
        reader = self._source.open(shard)
        block = reader.block(0, len(reader))
        base = block.bounds[0]
        # Offsets relative to the records' bytes, so a record is one slice of ``data``.
        bounds = [b - base for b in block.bounds]
        self._readers[shard] = reader
        self._open[shard] = (block.data, bounds)
        return self._open[shard]


def read_units(
    source: ShardSource, plan: EpochPlan, place: Placement, *, start: int, unit: int
) -> Iterator[Unit]:
    """This worker's units from position ``start`` on, each ``(stop position, records)``."""
    shards = _OpenShards(source)
    size = plan.windows.size
    window = -1
    try:
        for positions in worker_units(start, plan.length, unit, place):
            if positions.start // size != window:
                window = positions.start // size
                _enter_window(source, plan, shards, window)
            records = [shards.record(*plan.locate(q)) for q in positions]
            yield positions.stop, records
    finally:
        shards.keep_only(set())


def _enter_window(source: ShardSource, plan: EpochPlan, shards: _OpenShards, k: int) -> None:
    now = plan.window_shards(k) + plan.window_shards(k + 1)
    shards.keep_only(set(now))
    ahead = now + plan.window_shards(k + 2)
    source.prefetch([shard for shard in ahead if shard not in shards])
