"""The debugger's exceptions, named as smdebug's (``smdebug.exceptions``).

A reader raises :class:`TensorUnavailableForStep`, :class:`TensorUnavailable`,
:class:`StepUnavailable`, :class:`StepNotYetAvailable` or :class:`NoMoreData` as smdebug's does;
a rule raises :class:`RuleEvaluationConditionMet`. :class:`DebugFormatError` is ours: a file that
is not what the layout says (it names the file and the byte offset).
"""

from __future__ import annotations

__all__ = [
    "DebugConfigError",
    "DebugFormatError",
    "IndexReaderException",
    "MissingCollectionFiles",
    "NoMoreData",
    "RuleEvaluationConditionMet",
    "StepNotYetAvailable",
    "StepUnavailable",
    "TensorUnavailable",
    "TensorUnavailableForStep",
]


def _mode(mode: object) -> str:
    return str(getattr(mode, "name", mode))


class DebugConfigError(ValueError):
    """A hook configuration (``debughookconfig.json``) is invalid; the message names the key."""


class DebugFormatError(ValueError):
    """A debug-output file is corrupt, too large or not in the layout; the message says where."""


class IndexReaderException(Exception):
    """An index file could not be read."""


class MissingCollectionFiles(Exception):
    """No collections file appeared where the trial looked."""

    def __init__(self, path: str = "") -> None:
        super().__init__(f"no collection files found under {path}" if path else "")


class NoMoreData(Exception):
    """The job has ended and every step it wrote has been read."""

    def __init__(self, message: str = "training has ended: no more steps will be written") -> None:
        super().__init__(message)


class StepNotYetAvailable(Exception):
    """The step is not there yet, but the job may still write it."""

    def __init__(self, step: int, mode: object) -> None:
        super().__init__(f"step {step} of mode {_mode(mode)} is not available yet")
        self.step, self.mode = step, mode


class StepUnavailable(Exception):
    """The step was never saved (a later step exists, or the job has ended)."""

    def __init__(self, step: int, mode: object) -> None:
        super().__init__(f"step {step} of mode {_mode(mode)} was not saved")
        self.step, self.mode = step, mode


class TensorUnavailable(Exception):
    """No step holds a tensor of this name."""

    def __init__(self, tname: str) -> None:
        super().__init__(f"tensor {tname!r} was not saved")
        self.tname = tname


class TensorUnavailableForStep(Exception):
    """The tensor exists, but not at this step (or not with this reduction)."""

    def __init__(self, tname: str, step: int, mode: object = None, has_reductions: bool = False):
        where = f"step {step}" + (f" of mode {_mode(mode)}" if mode is not None else "")
        more = " (only reductions were saved for it)" if has_reductions else ""
        super().__init__(f"tensor {tname!r} was not saved at {where}{more}")
        self.tname, self.step, self.mode = tname, step, mode


class RuleEvaluationConditionMet(Exception):
    """A rule's condition held at a step."""

    def __init__(self, rule_name: str, step: int, end_of_rule: bool = False) -> None:
        super().__init__(f"evaluation of rule {rule_name} at step {step} met its condition")
        self.rule_name, self.step, self.end_of_rule = rule_name, step, end_of_rule
