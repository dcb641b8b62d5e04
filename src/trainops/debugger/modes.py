"""Training modes, as smdebug numbers them: a step is counted globally and within its mode.

``ModeKeys.TRAIN`` is 1, ``EVAL`` 2, ``PREDICT`` 3 and ``GLOBAL`` 4 (the hook's default); the
module-level ``TRAIN`` ... ``GLOBAL`` are the same members, so ``modes.TRAIN`` reads as in
smdebug. Event files carry the mode by its number, index files by its name.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ALLOWED_MODE_NAMES",
    "EVAL",
    "GLOBAL",
    "MODE_PLUGIN_NAME",
    "MODE_STEP_PLUGIN_NAME",
    "PREDICT",
    "TRAIN",
    "ModeKeys",
    "parse_mode",
]


class ModeKeys(IntEnum):
    """The phase a step belongs to."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


TRAIN = ModeKeys.TRAIN
EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT
GLOBAL = ModeKeys.GLOBAL
ALLOWED_MODE_NAMES = tuple(mode.name for mode in ModeKeys)
MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"


def parse_mode(value: object) -> ModeKeys:
    """A mode from a member, its number or its name (``"TRAIN"``, ``"ModeKeys.TRAIN"``)."""
    if isinstance(value, ModeKeys):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return ModeKeys(value)
        except ValueError:
            pass
    if isinstance(value, str):
        name = value.rsplit(".", 1)[-1].strip().upper()
        if name in ALLOWED_MODE_NAMES:
            return ModeKeys[name]
    raise ValueError(f"mode {value!r} is not one of {', '.join(ALLOWED_MODE_NAMES)}")
