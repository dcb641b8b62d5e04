"""trainops' shard format and where shards are read from.

``_format`` (the shard file: :class:`ShardReader`, ``write_shard``), ``_index`` (a dataset's
``index.json``), and the sources a :class:`StreamingDataset` opens shards from at random:
``_source`` (the contract), ``_local`` (a folder) and ``_remote`` (object storage, fetched ahead
into the bounded ``_cache``). The public names are exported by :mod:`trainops.data`; the modules
here import nothing from the other parts of the data library.
"""
