"""``smdebug.core.reduction_config``: ``ReductionConfig``."""

from __future__ import annotations

from trainops.debugger.config import ALLOWED_NORMS, ALLOWED_REDUCTIONS, ReductionConfig

__all__ = ["ALLOWED_NORMS", "ALLOWED_REDUCTIONS", "ReductionConfig"]
