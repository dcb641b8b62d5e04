"""``smdebug.rules``: the custom-rule base ``Rule`` and ``invoke_rule``, backed by trainops."""

from __future__ import annotations

from typing import Any

__all__ = ["Rule", "invoke_rule"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trainops.debugger import rules

        return getattr(rules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
