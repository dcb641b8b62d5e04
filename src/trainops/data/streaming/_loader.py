""":class:`StreamingLoader`: a torch DataLoader over a :class:`StreamingDataset`, with position.

The dataset makes its own batches, so the DataLoader runs with ``batch_size=None`` and passes
each :class:`RecordBatch` through untouched. Records are read in worker processes, where the
training process cannot see how far they got; each batch says where it ends, and the loader
hands that to the dataset as the loop takes it, so ``dataset.state_dict()`` is always the
position of the last batch the loop received (batches prefetched by workers but not yet taken
do not count). At the end of an epoch the dataset moves to the next one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from trainops.data.streaming._batch import RecordBatch

if TYPE_CHECKING:
    from trainops.data.streaming._dataset import StreamingDataset

__all__ = ["StreamingLoader"]


def keep_batch(batch: RecordBatch) -> RecordBatch:
    """The DataLoader's collate function: the batch as the dataset made it."""
    return batch


class StreamingLoader:
    """Iterate for the dataset's batches; ``dataloader`` is the torch DataLoader underneath."""

    def __init__(self, dataset: StreamingDataset, **options: Any) -> None:
        from torch.utils.data import DataLoader

        if dataset.batch_size is None:
            raise ValueError("loader() needs the dataset's batch_size (the dataset makes batches)")
        for name in ("batch_size", "shuffle", "sampler", "batch_sampler"):
            if options.get(name) is not None and not (name == "shuffle" and not options[name]):
                raise ValueError(f"loader(): {name} is the dataset's business, not the loader's")
        if options.get("persistent_workers"):
            raise ValueError(
                "loader(): persistent_workers would keep each worker's copy of the dataset at "
                "its first epoch; leave it off"
            )
        options.setdefault("collate_fn", keep_batch)
        self.dataset = dataset
        as_torch: Any = dataset  # an IterableDataset at run time (torch is installed here)
        self.dataloader: DataLoader[RecordBatch] = DataLoader(as_torch, batch_size=None, **options)

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self) -> Iterator[RecordBatch]:
        epoch = self.dataset.epoch
        for batch in self.dataloader:
            self.dataset.note_progress(batch)
            yield batch
        self.dataset.set_epoch(epoch + 1)
