"""The tuning package stays light: its records need neither pydantic nor Optuna, and a config
is read and checked without Optuna (a search imports it, with an install hint when missing)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.tuning.conftest import make_config


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint(' '.join(m for m in ('pydantic', 'optuna') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_records_import_neither_pydantic_nor_optuna() -> None:
    assert _loaded_after("from trainops.tuning import TrialRecord, TrialStatus, Proposal") == set()


def test_a_config_is_checked_without_optuna() -> None:
    statement = "from tests.tuning.conftest import make_config; make_config()"
    assert _loaded_after(statement) == {"pydantic"}


def test_a_search_without_optuna_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainops.tuning import Search

    monkeypatch.setitem(sys.modules, "optuna", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'trainops\[tuning\]'"):
        Search(make_config())
