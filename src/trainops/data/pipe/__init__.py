"""Pipe-mode channels seen from the training script.

``_channel`` (the channel's config, its FIFOs and the shared epoch counter), ``_dataset``
(:class:`PipeModeDataset`: a channel's records, one epoch per iteration) and ``_shards``
(trainops shards arriving one after another on a FIFO). Built on the record formats and the
shard format; the public names are exported by :mod:`trainops.data`.
"""
