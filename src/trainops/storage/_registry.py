"""The one table that maps a URI scheme to its store implementation.

Each entry is a factory that makes the store from the settings; ``s3`` is a lazy entry (its
module and fsspec's S3 client are imported only by a command that touches ``s3://``). The
spec's location check and the conformance suite read the schemes from here.
"""

from __future__ import annotations

from collections.abc import Callable

from trainops._errors import StorageError
from trainops._registry import Registry
from trainops._settings import Settings
from trainops.storage._base import ObjectStore, split_uri
from trainops.storage._file import FileStore

__all__ = ["STORES", "StoreFactory", "store_for"]

#: Makes a scheme's store from the settings.
StoreFactory = Callable[[Settings], ObjectStore]

STORES: Registry[StoreFactory] = Registry(
    "storage scheme", error=StorageError, shown=lambda scheme: f"{scheme}://"
)


@STORES.register("file")
def _file_store(settings: Settings) -> ObjectStore:
    del settings
    return FileStore()


STORES.register_lazy("s3", "trainops.storage._s3:s3_store")


def store_for(uri: str, settings: Settings) -> ObjectStore:
    """The store that handles ``uri``'s scheme."""
    scheme, _ = split_uri(uri)
    return STORES.lookup(scheme, where=f"{uri!r}: ")(settings)
