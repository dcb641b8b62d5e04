"""Object storage seam: ``file://`` (the embedded default) and ``s3://`` behind one contract.

Pick a store with :func:`store_for`; move many objects with :func:`download_objects` and
:func:`upload_tree`. Implementations are registered in one table (``_registry.STORES``).
"""

from trainops.storage._base import ByteCallback, ObjectInfo, ObjectStore, join_uri, split_uri
from trainops.storage._registry import STORES, store_for
from trainops.storage._transfer import Progress, download_objects, upload_tree

__all__ = [
    "STORES",
    "ByteCallback",
    "ObjectInfo",
    "ObjectStore",
    "Progress",
    "download_objects",
    "join_uri",
    "split_uri",
    "store_for",
    "upload_tree",
]
