"""An importable ``smdebug`` package backed by trainops' debugger, for scripts written for smdebug.

:data:`COMPAT_DIR` holds the ``smdebug`` package. trainops' bootstrap appends it to the end of
the script's ``sys.path`` (after site-packages), so ``import smdebug.pytorch as smd`` works in a
job, and a real smdebug, where one is installed, is the one imported. What it covers is listed
in docs/debugger.md ("smdebug compatibility").
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["COMPAT_DIR"]

#: The directory to put on ``sys.path`` (it holds ``smdebug/``).
COMPAT_DIR = Path(__file__).resolve().parent
