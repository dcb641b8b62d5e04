"""The hook's step counters: the global step and each mode's own step, as smdebug counts them.

Both start at -1; each step (a forward of a registered model) adds one to the global step and
to the current mode's step. A mode's first step is 0.
"""

from __future__ import annotations

from trainops.debugger.modes import ModeKeys

__all__ = ["StepCounter"]


class StepCounter:
    """``step`` (global), ``mode``, and ``mode_steps`` per mode."""

    def __init__(self) -> None:
        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps: dict[ModeKeys, int] = {ModeKeys.GLOBAL: -1}

    @property
    def mode_step(self) -> int:
        return self.mode_steps[self.mode]

    def set_mode(self, mode: ModeKeys) -> None:
        self.mode = mode
        self.mode_steps.setdefault(mode, -1)

    def advance(self) -> None:
        self.step += 1
        self.mode_steps[self.mode] += 1
        if self.mode is not ModeKeys.GLOBAL:
            self.mode_steps[ModeKeys.GLOBAL] = self.step
