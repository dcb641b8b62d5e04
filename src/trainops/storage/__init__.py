"""Object storage seam: ``file://`` (the embedded default) and ``s3://`` behind one contract.

Pick a store with :func:`store_for`; move many objects with :func:`download_objects` and
:func:`upload_tree`. Implementations are registered in one table (``_registry.STORES``).
Names are imported on first use: a command that uploads one file does not need the
many-object transfers (thread pools, logging), and every process reads the storage's settings
(``_settings``) without the rest.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.storage._base import ByteCallback, ObjectInfo, ObjectStore, join_uri, split_uri
    from trainops.storage._grants import JobGrant
    from trainops.storage._registry import STORES, store_for
    from trainops.storage._transfer import Progress, download_objects, upload_tree

__all__ = [
    "STORES",
    "ByteCallback",
    "JobGrant",
    "ObjectInfo",
    "ObjectStore",
    "Progress",
    "download_objects",
    "join_uri",
    "split_uri",
    "store_for",
    "upload_tree",
]

_MODULE_OF = {
    "ByteCallback": "trainops.storage._base",
    "JobGrant": "trainops.storage._grants",
    "ObjectInfo": "trainops.storage._base",
    "ObjectStore": "trainops.storage._base",
    "join_uri": "trainops.storage._base",
    "split_uri": "trainops.storage._base",
    "STORES": "trainops.storage._registry",
    "store_for": "trainops.storage._registry",
    "Progress": "trainops.storage._transfer",
    "download_objects": "trainops.storage._transfer",
    "upload_tree": "trainops.storage._transfer",
}

__getattr__, __dir__ = lazy_names("trainops.storage", globals(), _MODULE_OF)
