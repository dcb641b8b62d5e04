"""One rank's epoch over shards that can be opened at will (a folder or object storage).

:class:`EpochPlan` says which record sits at each position of the rank's sequence: the shards
in the epoch's order (permuted by ``(seed, epoch)`` when shuffling), the rank's contiguous run
of that order (:mod:`_partition`), and each window of ``shuffle_window`` positions permuted by
itself (:mod:`_shuffle`). Finding the record at a position costs a slice of the window's
permutation and a binary search over shard starts, so an epoch can begin at any position without
replaying the ones before it; the loop that does it runs once per record and is kept to a few
operations. :func:`read_units` reads this worker's units of positions, keeping open only the
shards of the window being read and the next, and asking the source to fetch the ones after.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate

from trainops.data.shards._format import ShardReader
from trainops.data.shards._index import ShardIndex
from trainops.data.shards._source import ShardSource
from trainops.data.streaming._partition import Placement, rank_length, worker_units
from trainops.data.streaming._shuffle import Windows, permutation

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

    def epoch_positions(self, positions: range) -> list[int]:
        """Where in the epoch's order the records shown at ``positions`` are (one window
        lookup per window, not per record: this runs for every record read)."""
        out: list[int] = []
        size, lo, hi = self.windows.size, positions.start, positions.stop
        while lo < hi:
            base = lo - lo % size
            end = min(hi, base + size)
            order = self.windows.order(base // size, min(size, self.length - base))
            start, total = self.offset + base, self.total
            out += [(start + o) % total for o in order[lo - base : end - base]]
            lo = end
        return out

    def records(self, positions: range, shards: _OpenShards) -> list[memoryview]:
        """The records shown at ``positions``, as slices of their shards."""
        starts, order, opened = self.starts, self.order, shards.opened
        out = []
        for g in self.epoch_positions(positions):
            slot = bisect_right(starts, g) - 1
            data, bounds = opened[order[slot]]
            i = g - starts[slot]
            out.append(data[bounds[i] : bounds[i + 1]])
        return out

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
    """The shards being read: ``opened[k]`` is shard ``k``'s records as one byte view and their
    offsets into it, the shard opened on first use."""

    def __init__(self, source: ShardSource) -> None:
        self._readers: dict[int, ShardReader] = {}
        self.opened = _Opened(source, self._readers)

    def keep_only(self, shards: set[int]) -> None:
        for shard in [s for s in self.opened if s not in shards]:
            del self.opened[shard]
            self._readers.pop(shard).close()

    def __contains__(self, shard: int) -> bool:
        return shard in self.opened


class _Opened(dict[int, tuple[memoryview, list[int]]]):
    def __init__(self, source: ShardSource, readers: dict[int, ShardReader]) -> None:
        super().__init__()
        self._source, self._readers = source, readers

    def __missing__(self, shard: int) -> tuple[memoryview, list[int]]:
        reader = self._source.open(shard)
        self._readers[shard] = reader
        block = reader.block(0, len(reader))
        base = block.bounds[0]
        # Offsets relative to the records' bytes, so a record is one slice of ``data``.
        self[shard] = (block.data, [b - base for b in block.bounds])
        return self[shard]


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
            yield positions.stop, plan.records(positions, shards)
    finally:
        shards.keep_only(set())


def _enter_window(source: ShardSource, plan: EpochPlan, shards: _OpenShards, k: int) -> None:
    now = plan.window_shards(k) + plan.window_shards(k + 1)
    shards.keep_only(set(now))
    ahead = now + plan.window_shards(k + 2)
    source.prefetch([shard for shard in ahead if shard not in shards])
