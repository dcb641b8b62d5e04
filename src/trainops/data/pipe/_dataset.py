""":class:`PipeModeDataset`: the records of a Pipe-mode channel, one epoch per iteration.

Modelled on SageMaker's ``sagemaker_tensorflow.PipeModeDataset`` (same arguments, same epoch
rule) for PyTorch or plain Python: the channel must be in Pipe mode in
``inputdataconfig.json``; each iteration opens the channel's next FIFO ``<channel>_<epoch>``
(the epoch counter is shared by every process of the job, as the reference's pipe state is),
waiting up to ``timeout`` seconds for it to appear and for its writer to start, and yields its
records: RecordIO payloads, TFRecord payloads or text lines (the readers registered in
:data:`RECORD_FORMATS`). A corrupt record is an error naming
the channel, the epoch and its byte offset in the stream (or is skipped, up to
``max_corrupt``). Leaving an iteration early closes the FIFO: the agent then moves to the next
epoch.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, Protocol

from trainops._registry import Registry
from trainops.data._torch import iterable_base, worker_slot
from trainops.data.pipe._channel import PipeChannel

if TYPE_CHECKING:
    _Base = object
else:
    _Base = iterable_base()

__all__ = ["RECORD_FORMATS", "PipeModeDataset", "RecordFormat", "RecordReaderType"]

RecordFormat = Literal["RecordIO", "TFRecord", "TextLine"]  # RECORD_FORMATS' names (a test checks)


class RecordReaderType(Protocol):
    """Makes the reader of one stream: its records (bytes or text lines), in order."""

    def __call__(self, stream: BinaryIO, *, source: str, max_corrupt: int) -> Iterable[Any]: ...


#: ``record_format`` -> its reader; lazy, so a script imports only the reader it reads with.
RECORD_FORMATS: Registry[RecordReaderType] = Registry("record format", error=ValueError)
RECORD_FORMATS.register_lazy("RecordIO", "trainops.data.formats._recordio:RecordIOReader")
RECORD_FORMATS.register_lazy("TFRecord", "trainops.data.formats._tfrecord:TFRecordReader")
RECORD_FORMATS.register_lazy("TextLine", "trainops.data.formats._lines:LineReader")


class PipeModeDataset(_Base):
    """Records of Pipe channel ``channel``; a list of ``batch_size`` records per item if set."""

    def __init__(
        self,
        channel: str,
        record_format: RecordFormat = "RecordIO",
        *,
        state_dir: str | os.PathLike[str] | None = None,
        pipe_dir: str | os.PathLike[str] | None = None,
        config_dir: str | os.PathLike[str] | None = None,
        max_corrupt: int = 0,
        timeout: float = 120.0,
        batch_size: int | None = None,
    ) -> None:
        RECORD_FORMATS.lookup(record_format, where="record_format: ")
        if max_corrupt < 0:
            raise ValueError(f"max_corrupt must be 0 or more, not {max_corrupt}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be 1 or more (or None), not {batch_size}")
        self.channel = PipeChannel.find(
            channel, pipe_dir=pipe_dir, state_dir=state_dir, config_dir=config_dir, timeout=timeout
        )
        self.record_format = record_format
        self.max_corrupt = max_corrupt
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[bytes | str | list[Any]]:
        _, workers = worker_slot()
        if workers > 1:
            raise ValueError(
                f"channel {self.channel.name!r}: one process reads a Pipe channel's FIFO, so use "
                f"a DataLoader with num_workers 0 or 1 (not {workers})"
            )
        epoch = self.channel.claim()
        with self.channel.open(epoch) as stream:
            records = self._records(stream, self.channel.label(epoch))
            if self.batch_size is None:
                yield from records
            else:
                yield from _batched(records, self.batch_size)

    def _records(self, stream: BinaryIO, label: str) -> Iterator[Any]:
        reader = RECORD_FORMATS.lookup(self.record_format)
        return iter(reader(stream, source=label, max_corrupt=self.max_corrupt))


def _batched(records: Iterator[bytes] | Iterator[str], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
