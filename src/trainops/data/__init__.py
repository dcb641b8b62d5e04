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
    from trainops.data._batch import RecordBatch
    from trainops.data._errors import CorruptBudget, CorruptRecordError, PackError
    from trainops.data._example import Feature, decode_example, encode_example
    from trainops.data._index import (
        INDEX_NAME,
        SHARD_FORMAT,
        DatasetIndexError,
        ShardIndex,
        ShardInfo,
    )
    from trainops.data._lines import LineReader
    from trainops.data._loader import StreamingLoader
    from trainops.data._pack import PackOptions, PackResult, pack
    from trainops.data._partition import PlacementError
    from trainops.data._pipe_channel import PipeChannelError
    from trainops.data._pipe_dataset import PipeModeDataset
    from trainops.data._recordio import (
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
    from trainops.data._shards import (
        SHARD_MAGIC,
        RecordBlock,
        ShardReader,
        encode_shard,
        write_shard,
    )
    from trainops.data._streaming import StreamingDataset
    from trainops.data._tfrecord import (
        TFRecordReader,
        TFRecordWriter,
        Verify,
        masked_crc32c,
        tfrecord_frame,
    )

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
    "DatasetIndexError": "trainops.data._index",
    "Feature": "trainops.data._example",
    "TFRecordReader": "trainops.data._tfrecord",
    "TFRecordWriter": "trainops.data._tfrecord",
    "Verify": "trainops.data._tfrecord",
    "decode_example": "trainops.data._example",
    "encode_example": "trainops.data._example",
    "masked_crc32c": "trainops.data._tfrecord",
    "tfrecord_frame": "trainops.data._tfrecord",
    "INDEX_NAME": "trainops.data._index",
    "IRHeader": "trainops.data._recordio",
    "LineReader": "trainops.data._lines",
    "PackError": "trainops.data._errors",
    "PackOptions": "trainops.data._pack",
    "PackResult": "trainops.data._pack",
    "pack": "trainops.data._pack",
    "RECORDIO_MAGIC": "trainops.data._recordio",
    "RecordBlock": "trainops.data._shards",
    "RecordIOReader": "trainops.data._recordio",
    "RecordIOWriter": "trainops.data._recordio",
    "SHARD_FORMAT": "trainops.data._index",
    "SHARD_MAGIC": "trainops.data._shards",
    "ShardIndex": "trainops.data._index",
    "ShardInfo": "trainops.data._index",
    "ShardReader": "trainops.data._shards",
    "encode_shard": "trainops.data._shards",
    "pack_irheader": "trainops.data._recordio",
    "read_idx": "trainops.data._recordio",
    "recordio_frame": "trainops.data._recordio",
    "recordio_header": "trainops.data._recordio",
    "recordio_padding": "trainops.data._recordio",
    "unpack_irheader": "trainops.data._recordio",
    "write_idx": "trainops.data._recordio",
    "write_shard": "trainops.data._shards",
    "PipeChannelError": "trainops.data._pipe_channel",
    "PipeModeDataset": "trainops.data._pipe_dataset",
    "PlacementError": "trainops.data._partition",
    "RecordBatch": "trainops.data._batch",
    "StreamingDataset": "trainops.data._streaming",
    "StreamingLoader": "trainops.data._loader",
}


__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF)
