"""Reading a debugger rule's parameters: SageMaker sends every one as a string.

``RuleParameters`` are strings in the API (``"threshold": "1e-07"``), the catalog and a notebook
give them typed; each reader here takes either and raises a ValueError naming the rule and the
parameter when it cannot.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["as_bool", "as_float", "as_int", "as_names", "as_optional_float"]

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})
_MAX_NAMES = 100
_MAX_CHARS = 4096


def as_float(rule: str, key: str, value: Any) -> float:
    """A finite number."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"{rule}.{key} must be a finite number, not {_shown(value)}")
    return number


def as_optional_float(rule: str, key: str, value: Any) -> float | None:
    """A finite number, or None (``None``, ``""`` or ``"None"``)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    return as_float(rule, key, value)


def as_int(rule: str, key: str, value: Any, *, minimum: int = 0) -> int:
    """A whole number of at least ``minimum``."""
    number = as_float(rule, key, value)
    if number != int(number) or number < minimum:
        raise ValueError(
            f"{rule}.{key} must be a whole number of {minimum} or more, not {_shown(value)}"
        )
    return int(number)


def as_bool(rule: str, key: str, value: Any) -> bool:
    """``True``/``False`` or their strings (``"true"``, ``"False"``, ``"1"``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{rule}.{key} must be true or false, not {_shown(value)}")


def as_names(rule: str, key: str, value: Any) -> list[str]:
    """A list of names or regexes: a list, or one string of comma-separated items."""
    if value is None:
        return []
    if isinstance(value, str):
        if len(value) > _MAX_CHARS:
            raise ValueError(f"{rule}.{key} is longer than {_MAX_CHARS} characters")
        items = [item.strip() for item in value.split(",")]
    elif isinstance(value, list | tuple):
        items = [str(item).strip() for item in value]
    else:
        raise ValueError(f"{rule}.{key} must be a string or a list of strings, not {_shown(value)}")
    items = [item for item in items if item and item != "None"]
    if len(items) > _MAX_NAMES:
        raise ValueError(f"{rule}.{key} names more than {_MAX_NAMES} items")
    return items


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
