"""``smdebug.trials``: ``create_trial`` and ``Trial``, backed by trainops' trial reader."""

from __future__ import annotations

from trainops.debugger import Trial, create_trial

__all__ = ["Trial", "create_trial"]
