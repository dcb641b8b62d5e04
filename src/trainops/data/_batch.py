""":class:`RecordBatch`: a batch of records as one byte string, so it crosses processes cheaply.

A DataLoader worker hands its results to the training process by pickling them; a list of 256
small ``bytes`` costs 256 objects to build, pickle and unpickle, a ``RecordBatch`` one byte
string and one array of offsets. Records are read back as ``memoryview`` slices of that string.
The batch also says where it ends in its rank's epoch (``epoch``, ``stop``), which is how the
training process knows how far it got when records were read in worker processes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Any

__all__ = ["RecordBatch"]

Bytes = bytes | bytearray | memoryview


class RecordBatch:
    """Records ``k`` is ``data[bounds[k]:bounds[k + 1]]``; ``len`` is the number of records."""

    __slots__ = ("bounds", "data", "epoch", "stop")

    def __init__(self, data: bytes, bounds: Sequence[int], *, epoch: int = 0, stop: int = 0):
        self.data = data
        self.bounds = bounds
        self.epoch = epoch
        self.stop = stop

    @classmethod
    def of(cls, records: Sequence[Bytes], *, epoch: int = 0, stop: int = 0) -> RecordBatch:
        """A batch holding ``records`` (copied once, into one string)."""
        bounds = array("Q", accumulate(map(len, records), initial=0))
        return cls(b"".join(records), bounds, epoch=epoch, stop=stop)

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, k: int) -> memoryview:
        if not -len(self) <= k < len(self):
            raise IndexError(f"record {k} of a batch of {len(self)}")
        k %= len(self)
        return memoryview(self.data)[self.bounds[k] : self.bounds[k + 1]]

    def __iter__(self) -> Iterator[memoryview]:
        view, bounds = memoryview(self.data), self.bounds
        return (view[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1))

    def tolist(self) -> list[bytes]:
        """The records as separate ``bytes``."""
        data, bounds = self.data, self.bounds
        return [data[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordBatch):
            return NotImplemented
        return self.tolist() == other.tolist()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RecordBatch({len(self)} records, {len(self.data)} bytes, epoch {self.epoch})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.data, self.bounds, self.epoch, self.stop))


def _rebuild(data: bytes, bounds: Sequence[int], epoch: int, stop: int) -> RecordBatch:
    return RecordBatch(data, bounds, epoch=epoch, stop=stop)
