"""Putting a handler's answer on the wire by the model's output shape: members the model does
not have are left out (our own extra keys), timestamps become epoch seconds (JSON 1.1 encodes
them as numbers) and nothing is sent that botocore's parser would refuse.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from botocore.model import Shape

__all__ = ["to_wire"]


def to_wire(value: Any, shape: Shape) -> Any:
    """``value`` shaped as ``shape``; ``None`` where it has no such value."""
    if value is None:
        return None
    kind = shape.type_name
    if kind == "structure":
        return _structure(value, shape) if isinstance(value, dict) else None
    if kind == "list":
        items = [to_wire(item, shape.member) for item in value]
        return [item for item in items if item is not None]
    if kind == "map":
        return {str(k): to_wire(v, shape.value) for k, v in value.items()}
    if kind == "timestamp":
        return _epoch(value)
    return value


def _structure(value: dict[str, Any], shape: Shape) -> dict[str, Any]:
    members = shape.members
    shaped = {name: to_wire(value.get(name), member) for name, member in members.items()}
    return {name: item for name, item in shaped.items() if item is not None}


def _epoch(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return datetime.fromisoformat(value).timestamp()
    return None
