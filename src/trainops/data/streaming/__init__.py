""":class:`StreamingDataset`: packed shards streamed into a PyTorch training loop.

``_dataset`` (the dataset), one epoch of a rank over shards opened at will (``_indexed_epoch``,
with ``_partition`` and ``_shuffle``) or arriving on a Pipe channel (``_pipe_epoch``), what
crosses the DataLoader worker boundary (``_batch`` through ``_shm_ring``), the loader that keeps
the position (``_loader``) and the resumable state (``_state``). It sits on top of the data
library: shards, Pipe channels and record formats; the public names are exported by
:mod:`trainops.data`.
"""
