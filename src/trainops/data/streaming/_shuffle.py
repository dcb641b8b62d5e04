"""Deterministic permutations and the windowed record shuffle of :class:`StreamingDataset`.

A permutation is a Fisher-Yates shuffle drawn from ``random.Random`` seeded with a string made
of its key (seed, epoch, ...). Only ``Random.random()`` is used: Python guarantees that method's
sequence for a given seed across versions (unlike ``shuffle`` or ``randrange``), so the same key
gives the same order on every machine and Python release.

The record shuffle cuts a rank's sequence of ``length`` records into windows of ``size``
records and permutes each window by itself: position ``q`` of the output is record
``k * size + perm_k[q - k * size]`` of the sequence, ``k = q // size``. Any position is found
from its window alone (no replay from the start of the epoch), and only the records of one
window (and the shards under it) need to be at hand at a time.
"""

from __future__ import annotations

import random

__all__ = ["MAX_WINDOW", "Windows", "default_window", "permutation"]

MAX_WINDOW = 1 << 18


def default_window(record_bytes: float, budget: int) -> int:
    """Records in a window by default: as many as ``budget`` bytes hold, at most
    :data:`MAX_WINDOW` (MosaicML's smallest default block), at least one."""
    return max(1, min(MAX_WINDOW, int(budget // max(record_bytes, 1.0))))


def permutation(n: int, *key: object) -> list[int]:
    """A permutation of ``range(n)`` fixed by ``key``."""
    rng = random.Random("trainops/" + "/".join(map(str, key)))
    draw = rng.random
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = int(draw() * (i + 1))
        order[i], order[j] = order[j], order[i]
    return order


class Windows:
    """Maps an output position to a position of the unshuffled sequence, window by window.

    ``length`` is the sequence's length when known (the last window is shorter); a caller that
    learns a window's length only later (a Pipe channel) passes it to :meth:`order`.
    """

    def __init__(self, size: int, key: tuple[object, ...], *, shuffle: bool) -> None:
        if size < 1:
            raise ValueError(f"shuffle_window must be 1 or more, not {size}")
        self.size = size
        self._key = key
        self._shuffle = shuffle
        self._cached: tuple[int, list[int]] | None = None

    def order(self, k: int, length: int) -> list[int]:
        """Window ``k`` (of ``length`` records) in output order, as offsets into the window."""
        if self._cached is not None and self._cached[0] == k and len(self._cached[1]) == length:
            return self._cached[1]
        order = permutation(length, *self._key, k) if self._shuffle else list(range(length))
        self._cached = (k, order)
        return order

    def source(self, q: int, total: int) -> int:
        """The sequence position shown at output position ``q`` of a sequence of ``total``."""
        k, offset = divmod(q, self.size)
        start = k * self.size
        return start + self.order(k, min(self.size, total - start))[offset]
