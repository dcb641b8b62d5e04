"""``trainops.debugger.rules`` exports exactly its public names, and each resolves."""

from __future__ import annotations

import types

import trainops.debugger.rules as rules


def test_every_export_resolves() -> None:
    missing = [name for name in rules.__all__ if getattr(rules, name, None) is None]
    assert missing == []


def test_public_names_are_exported() -> None:
    public = {
        name
        for name, value in vars(rules).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - {"annotations"} == set(rules.__all__)


def test_every_built_in_rule_is_exported_by_its_name() -> None:
    for name, cls in rules.DEBUGGER_RULES.items():
        assert getattr(rules, name) is cls
