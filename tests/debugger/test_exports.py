"""The debugger's public names: each package's ``__all__`` resolves, and is sorted (merges)."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "trainops.debugger",
    "trainops.debugger.config",
    "trainops.debugger.format",
    "trainops.debugger.trial",
    "trainops.debugger.modes",
    "trainops.debugger.exceptions",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    missing = [n for n in package.__all__ if getattr(package, n, None) is None]
    assert missing == []


@pytest.mark.parametrize("name", PACKAGES)
def test_exports_are_sorted(name: str) -> None:
    # ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical
    exported = list(importlib.import_module(name).__all__)

    def key(item: str) -> tuple[int, str]:
        return (0 if item.isupper() else 1 if item[0].isupper() else 2, item)

    assert exported == sorted(exported, key=key)


def test_modes_read_as_smdebugs() -> None:
    from trainops.debugger import modes

    assert [modes.TRAIN, modes.EVAL, modes.PREDICT, modes.GLOBAL] == [1, 2, 3, 4]
    assert modes.ModeKeys.TRAIN is modes.TRAIN
    assert modes.parse_mode("ModeKeys.EVAL") is modes.EVAL
    with pytest.raises(ValueError, match="mode 'nope' is not one of"):
        modes.parse_mode("nope")
