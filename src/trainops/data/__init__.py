"""In-job data library: record formats, trainops' shard format and the shard packer.

Record readers and writers for RecordIO (MXNet/SageMaker), TFRecord (with ``tf.train.Example``)
and text lines share one error for corrupt records (:class:`CorruptRecordError`, naming the
source and byte offset) and one way to skip them (``max_corrupt``). :class:`ShardReader` reads
trainops' own shards, described by an ``index.json`` (:class:`ShardIndex`); :func:`pack` (the
``trainops pack`` command) makes them from many small files. :class:`StreamingDataset` streams
shards into PyTorch (shuffled, split by rank and worker, resumable) from a folder, an object
store or a Pipe channel; :class:`PipeModeDataset` reads a Pipe channel's records epoch by epoch.

Importable in a training script without a server: ``from trainops.data import
RecordIOReader``. Each exported name is imported on first use, so a script that reads
RecordIO does not pay for the packer (and torch is only imported by what needs it).
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.data._errors import CorruptBudget, CorruptRecordError, PackError
    from trainops.data.formats._example import Feature, decode_example, encode_example
    from trainops.data.formats._lines import LineReader
    from trainops.data.formats._recordio import (
        RECORDIO_MAGIC,
        IRHeader,
        RecordIOReader,
        RecordIOWriter,
        pack_irheader,
        read_idx,
        recordio_frame,
        recordio_header,
        recordio_padding,
        unpack_irheader,
        write_idx,
    )
    from trainops.data.formats._tfrecord import (
        TFRecordReader,
        TFRecordWriter,
        Verify,
        masked_crc32c,
        tfrecord_frame,
    )
    from trainops.data.packer._pack import PackOptions, PackResult, pack
    from trainops.data.pipe._channel import PipeChannelError
    from trainops.data.pipe._dataset import PipeModeDataset
    from trainops.data.shards._format import (
        SHARD_MAGIC,
        RecordBlock,
        ShardReader,
        encode_shard,
        write_shard,
    )
    from trainops.data.shards._index import (
        INDEX_NAME,
        SHARD_FORMAT,
        DatasetIndexError,
        ShardIndex,
        ShardInfo,
    )
    from trainops.data.streaming._batch import RecordBatch
    from trainops.data.streaming._dataset import StreamingDataset
    from trainops.data.streaming._loader import StreamingLoader
    from trainops.data.streaming._partition import PlacementError

__all__ = [
    "INDEX_NAME",
    "RECORDIO_MAGIC",
    "SHARD_FORMAT",
    "SHARD_MAGIC",
    "CorruptBudget",
    "CorruptRecordError",
    "DatasetIndexError",
    "Feature",
    "IRHeader",
    "LineReader",
    "PackError",
    "PackOptions",
    "PackResult",
    "PipeChannelError",
    "PipeModeDataset",
    "PlacementError",
    "RecordBatch",
    "RecordBlock",
    "RecordIOReader",
    "RecordIOWriter",
    "ShardIndex",
    "ShardInfo",
    "ShardReader",
    "StreamingDataset",
    "StreamingLoader",
    "TFRecordReader",
    "TFRecordWriter",
    "Verify",
    "decode_example",
    "encode_example",
    "encode_shard",
    "masked_crc32c",
    "pack",
    "pack_irheader",
    "read_idx",
    "recordio_frame",
    "recordio_header",
    "recordio_padding",
    "tfrecord_frame",
    "unpack_irheader",
    "write_idx",
    "write_shard",
]

_MODULE_OF = {
    "CorruptBudget": "trainops.data._errors",
    "CorruptRecordError": "trainops.data._errors",
    "DatasetIndexError": "trainops.data.shards._index",
    "Feature": "trainops.data.formats._example",
    "TFRecordReader": "trainops.data.formats._tfrecord",
    "TFRecordWriter": "trainops.data.formats._tfrecord",
    "Verify": "trainops.data.formats._tfrecord",
    "decode_example": "trainops.data.formats._example",
    "encode_example": "trainops.data.formats._example",
    "masked_crc32c": "trainops.data.formats._tfrecord",
    "tfrecord_frame": "trainops.data.formats._tfrecord",
    "INDEX_NAME": "trainops.data.shards._index",
    "IRHeader": "trainops.data.formats._recordio",
    "LineReader": "trainops.data.formats._lines",
    "PackError": "trainops.data._errors",
    "PackOptions": "trainops.data.packer._pack",
    "PackResult": "trainops.data.packer._pack",
    "pack": "trainops.data.packer._pack",
    "RECORDIO_MAGIC": "trainops.data.formats._recordio",
    "RecordBlock": "trainops.data.shards._format",
    "RecordIOReader": "trainops.data.formats._recordio",
    "RecordIOWriter": "trainops.data.formats._recordio",
    "SHARD_FORMAT": "trainops.data.shards._index",
    "SHARD_MAGIC": "trainops.data.shards._format",
    "ShardIndex": "trainops.data.shards._index",
    "ShardInfo": "trainops.data.shards._index",
    "ShardReader": "trainops.data.shards._format",
    "encode_shard": "trainops.data.shards._format",
    "pack_irheader": "trainops.data.formats._recordio",
    "read_idx": "trainops.data.formats._recordio",
    "recordio_frame": "trainops.data.formats._recordio",
    "recordio_header": "trainops.data.formats._recordio",
    "recordio_padding": "trainops.data.formats._recordio",
    "unpack_irheader": "trainops.data.formats._recordio",
    "write_idx": "trainops.data.formats._recordio",
    "write_shard": "trainops.data.shards._format",
    "PipeChannelError": "trainops.data.pipe._channel",
    "PipeModeDataset": "trainops.data.pipe._dataset",
    "PlacementError": "trainops.data.streaming._partition",
    "RecordBatch": "trainops.data.streaming._batch",
    "StreamingDataset": "trainops.data.streaming._dataset",
    "StreamingLoader": "trainops.data.streaming._loader",
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF)
