"""trainops' stand-in for ``smdebug`` (see ``trainops.debugger._compat``): the top-level names."""

from __future__ import annotations

from trainops.debugger.config import CollectionKeys, ReductionConfig, SaveConfig, SaveConfigMode
from trainops.debugger.modes import ModeKeys as modes

__all__ = [
    "CollectionKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "__version__",
    "modes",
]

#: The smdebug release whose API this package follows.
__version__ = "1.0.34+trainops"
