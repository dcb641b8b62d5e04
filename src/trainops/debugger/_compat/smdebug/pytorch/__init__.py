"""``smdebug.pytorch``: the hook, its configs and collections, backed by trainops (torch is
imported when the hook is first used, not by this import)."""

from __future__ import annotations

from typing import Any

from trainops.debugger.config import (
    Collection,
    CollectionKeys,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
)
from trainops.debugger.modes import ModeKeys as modes

__all__ = [
    "Collection",
    "CollectionKeys",
    "Hook",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "create_trial",
    "get_hook",
    "modes",
]


def __getattr__(name: str) -> Any:
    if name in ("Hook", "get_hook"):
        from trainops.debugger.hook import _hook

        return getattr(_hook, name)
    if name == "create_trial":
        from trainops.debugger import create_trial

        return create_trial
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
