"""Object storage seam: ``file://`` (the embedded default) and ``s3://`` behind one contract.

Pick a store with :func:`store_for`; move many objects with :func:`download_objects` and
:func:`upload_tree`. Implementations are registered in one table (``_registry.STORES``).
The many-object transfers (thread pools, logging) are imported on first use: a command that
uploads one file does not need them.
"""

from __future__ import annotations

import importlib
import typing

from trainops.storage._base import ByteCallback, ObjectInfo, ObjectStore, join_uri, split_uri
from trainops.storage._registry import STORES, store_for

if typing.TYPE_CHECKING:
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

_LAZY = frozenset({"Progress", "download_objects", "upload_tree"})


def __getattr__(name: str) -> typing.Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'trainops.storage' has no attribute {name!r}")
    value = getattr(importlib.import_module("trainops.storage._transfer"), name)
    globals()[name] = value
    return value
