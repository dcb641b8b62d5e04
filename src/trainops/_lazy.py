"""Packages whose public names are imported on first use (PEP 562 module ``__getattr__``).

``trainops.spec`` and ``trainops.server`` export names whose modules are heavy (pydantic,
Starlette); a command that needs none of them must not pay for importing them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: dict[str, Any], module_of: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name is imported from its module
    in ``module_of`` when first asked for, then kept in the package's ``namespace``."""

    def getattr_(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(namespace.get("__all__", module_of))

    return getattr_, dir_
