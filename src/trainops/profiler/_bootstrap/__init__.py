"""The directory the framework sidecar puts first on the script's ``PYTHONPATH``.

It holds ``sitecustomize.py`` (run by Python's ``site`` at every interpreter start), which
watches for ``import torch`` and then installs the step-timing hooks. This ``__init__`` only
makes the directory package data that installs with trainops; nothing imports it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BOOTSTRAP_DIR", "YIELD_AT_EXIT_ENV"]

#: The directory to put on ``PYTHONPATH``.
BOOTSTRAP_DIR = Path(__file__).resolve().parent

#: Set ("1") on the processes of a job of more than one process: ``sitecustomize`` then lets
#: torch's collective threads finish before the interpreter ends (see its docstring, 5.).
YIELD_AT_EXIT_ENV = "TRAINOPS_YIELD_AT_EXIT"
