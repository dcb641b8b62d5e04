"""The one table that maps a URI scheme to its store implementation."""

from __future__ import annotations

from collections.abc import Callable

from trainops._errors import StorageError
from trainops._settings import Settings
from trainops.storage._base import ObjectStore, split_uri
from trainops.storage._file import FileStore

__all__ = ["STORES", "store_for"]


def _s3_store(settings: Settings) -> ObjectStore:
    # Imported on first use: a command that only touches file:// (the default) never needs it.
    from trainops.storage._s3 import S3Store

    return S3Store(settings.s3, settings.transfer)


STORES: dict[str, Callable[[Settings], ObjectStore]] = {
    "file": lambda _settings: FileStore(),
    "s3": _s3_store,
}


def store_for(uri: str, settings: Settings) -> ObjectStore:
    """The store that handles ``uri``'s scheme."""
    scheme, _ = split_uri(uri)
    try:
        factory = STORES[scheme]
    except KeyError:
        known = ", ".join(f"{s}://" for s in sorted(STORES))
        raise StorageError(f"{uri!r}: unsupported scheme; known: {known}") from None
    return factory(settings)
