"""What the catalog knows of one built-in rule (profiler or debugger)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RuleDefinition"]


@dataclass(frozen=True, slots=True)
class RuleDefinition:
    """One built-in rule: its name, kind (``profiler`` or ``debugger``), parameters with
    defaults, and a line saying what it looks for.

    A debugger rule also has ``collections``: what its default configuration saves, as
    ``(collection name, {parameter: string})`` pairs the way SageMaker's rule configs write them
    (VanishingGradient: ``(("gradients", {"save_interval": "500"}),)``); ``sdk_name`` is its
    ``rule_configs`` function (``vanishing_gradient``)."""

    name: str
    kind: str
    defaults: Mapping[str, Any]
    summary: str
    collections: tuple[tuple[str, Mapping[str, str]], ...] = ()
    sdk_name: str | None = None
