"""The errors of trainops.data: corrupt records (with the budget that skips some), and packing.

A :class:`CorruptRecordError` names where the bad record is (a file path, or a label such as
``channel train, epoch 2``) and its byte offset. A reader given ``max_corrupt=N`` skips up to
``N`` bad records instead: :class:`CorruptBudget` counts them, raises on the one past the
limit, and logs one warning line with the count when the reader finishes.
"""

from __future__ import annotations

import logging

from trainops._errors import TrainopsError

__all__ = ["CorruptBudget", "CorruptRecordError", "PackError"]

_log = logging.getLogger("trainops.data")


class CorruptRecordError(TrainopsError):
    """A record could not be read: ``source`` says where, ``offset`` at which byte."""

    def __init__(self, source: str, offset: int, reason: str) -> None:
        self.source = source
        self.offset = offset
        self.reason = reason
        super().__init__(f"{source}: corrupt record at byte {offset}: {reason}")


class PackError(TrainopsError):
    """``trainops pack`` cannot go on; the message names the file, line or setting."""


class CorruptBudget:
    """Up to ``limit`` corrupt records of one source are skipped and counted."""

    def __init__(self, source: str, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"max_corrupt must be 0 or more, not {limit}")
        self.source = source
        self.limit = limit
        self.skipped = 0

    def spend(self, offset: int, reason: str) -> None:
        """Count one corrupt record at ``offset``; raise if the budget is spent."""
        if self.skipped >= self.limit:
            raise CorruptRecordError(self.source, offset, reason)
        self.skipped += 1

    def report(self) -> None:
        """Log the count once, if anything was skipped."""
        if self.skipped:
            _log.warning(
                "%s: skipped %d corrupt record(s) (max_corrupt=%d)",
                self.source,
                self.skipped,
                self.limit,
            )
