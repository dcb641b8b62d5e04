"""``smdebug.core.save_config``: ``SaveConfig`` and ``SaveConfigMode``."""

from __future__ import annotations

from trainops.debugger.config import SaveConfig, SaveConfigMode

__all__ = ["SaveConfig", "SaveConfigMode"]
