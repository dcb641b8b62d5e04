"""``trainops pack``: many small files into shards, in parallel, resumable.

``_pack`` (the plan and :func:`pack`), what is packed (``_source`` with ``_local_files`` and
``_source_lst``), where it goes (``_dest``), resuming (``_resume``), the processes (``_pool``,
``_worker``), the output formats (``_formats``) and the progress bar (``_progress``). Built on
the record formats (:mod:`trainops.data.formats`) and the shard format
(:mod:`trainops.data.shards`); nothing that reads records imports it. The public names are
exported by :mod:`trainops.data` (this package is not called ``pack``: that name is the
function).
"""
