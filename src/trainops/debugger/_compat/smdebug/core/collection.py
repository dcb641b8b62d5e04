"""``smdebug.core.collection``: ``Collection`` and ``CollectionKeys``."""

from __future__ import annotations

from trainops.debugger.config import Collection, CollectionKeys

__all__ = ["Collection", "CollectionKeys"]
