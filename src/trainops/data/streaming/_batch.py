""":class:`RecordBatch`: a batch of records that crosses the worker boundary as one message.

A DataLoader worker hands its results to the training process by pickling them into one queue
message per item. A :class:`StreamingDataset` with ``batch_size`` makes the batches itself, so
each message carries a whole batch: one message, and no per-record fetch and collate in the
worker. Inside a DataLoader worker the records do not even go through the pipe: pickling a
batch copies them into the worker's shared-memory ring and sends where they are
(:mod:`_shm_ring`), and the training process reads them in place. Where that cannot be (no room
in the ring, no shared memory, or a batch pickled outside a worker) the records are pickled as
``bytes``.

A batch is a ``list`` of records, each a read-only ``memoryview`` (``bytes(record)`` copies
one out), so an identity ``collate_fn`` and code written for a list of samples take it as it
is. It also says where it ends in its rank's epoch (``epoch``, ``stop``): that is how the
training process knows how far it got when the records were read in worker processes.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

__all__ = ["RecordBatch"]


class RecordBatch(list[memoryview]):
    """Records of one batch; ``epoch`` and ``stop`` place its end in the epoch."""

    __slots__ = ("epoch", "stop")

    def __init__(
        self, records: Iterable[memoryview] = (), *, epoch: int = 0, stop: int = 0
    ) -> None:
        super().__init__(records)
        self.epoch = epoch
        self.stop = stop

    def __repr__(self) -> str:
        return f"RecordBatch({len(self)} records, epoch {self.epoch}, ends at {self.stop})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, list):
            return NotImplemented
        return [bytes(r) for r in self] == [bytes(r) for r in other]

    def __reduce__(self) -> tuple[Any, ...]:
        size = sum(map(len, self))
        if size:
            from trainops.data.streaming._shm_ring import worker_ring

            ring = worker_ring(size)
            span = ring.write(self, size) if ring is not None else None
            if ring is not None and span is not None:
                where = (os.getpid(), ring.fd, ring.token, ring.capacity)
                bounds = array("Q", accumulate(map(len, self), initial=0)).tobytes()
                return (_from_ring, (where, span, bounds, self.epoch, self.stop))
        return (_rebuild, ([bytes(r) for r in self], self.epoch, self.stop))


def _rebuild(records: list[bytes], epoch: int, stop: int) -> RecordBatch:
    return RecordBatch(map(memoryview, records), epoch=epoch, stop=stop)


def _from_ring(
    where: tuple[int, int, bytes, int],
    span: tuple[int, int, int],
    bounds: bytes,
    epoch: int,
    stop: int,
) -> RecordBatch:
    from trainops.data.streaming._shm_ring import receive

    return RecordBatch(receive(where, span, bounds), epoch=epoch, stop=stop)
