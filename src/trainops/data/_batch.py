""":class:`RecordBatch`: a batch of records that crosses the worker boundary as one message.

A DataLoader worker hands its results to the training process by pickling them into one queue
message per item. A :class:`StreamingDataset` with ``batch_size`` makes the batches itself, so
each message carries a whole batch: one pickle, one queue round trip, one unpickle per batch
rather than per record (and no per-record fetch and collate in the worker). The records travel
as separate ``bytes``: measured on the benchmark machine, a list of 256 records of 4 KiB costs
the receiving process about a third of the CPU that one joined 1 MiB string does (every large
string is a fresh mapping of zeroed pages to fault in; records of a few KiB come from the
allocator's reused heap).

A batch is a ``list`` of ``bytes``, so an identity ``collate_fn`` and any code written for a
list of samples take it as it is; it also says where it ends in its rank's epoch (``epoch``,
``stop``), which is how the training process knows how far it got when records were read in
worker processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["RecordBatch"]


class RecordBatch(list[bytes]):
    """Records (``bytes``) of one batch; ``epoch`` and ``stop`` place its end in the epoch."""

    __slots__ = ("epoch", "stop")

    def __init__(self, records: Iterable[bytes] = (), *, epoch: int = 0, stop: int = 0) -> None:
        super().__init__(records)
        self.epoch = epoch
        self.stop = stop

    def __repr__(self) -> str:
        return f"RecordBatch({len(self)} records, epoch {self.epoch}, ends at {self.stop})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (list(self), self.epoch, self.stop))


def _rebuild(records: list[bytes], epoch: int, stop: int) -> RecordBatch:
    return RecordBatch(records, epoch=epoch, stop=stop)
