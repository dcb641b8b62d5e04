"""The PyTorch debugger hook: :class:`Hook` (smdebug's ``smdebug.pytorch.Hook``) and
:func:`get_hook`; :mod:`._auto` installs one with no code change.

Importing this package does not import torch; making a :class:`Hook` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainops.debugger.hook._hook import Hook, get_hook

__all__ = ["Hook", "get_hook"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trainops.debugger.hook import _hook

        return getattr(_hook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
