"""``smdebug.core.modes``: ``ModeKeys`` and the allowed modes."""

from __future__ import annotations

from trainops.debugger.modes import ALLOWED_MODE_NAMES, ModeKeys

__all__ = ["ALLOWED_MODES", "ALLOWED_MODE_NAMES", "ModeKeys"]

ALLOWED_MODES = list(ModeKeys)
