"""A byte budget shared by one store's transfers, so buffered data stays under a configured bound."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ByteBudget"]


class ByteBudget:
    """Callers take bytes before buffering them and give them back after; takers wait when full.

    A request larger than the whole budget is cut to the whole budget, so it waits for every
    other holder to finish instead of waiting forever. Requests are granted whole (never piece
    by piece), so two big requests cannot each hold half and deadlock.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"budget must be positive, got {limit}")
        self.limit = limit
        self._used = 0
        self._peak = 0
        self._waiting = 0
        self._cond = threading.Condition()

    @property
    def peak(self) -> int:
        """The most bytes held at once so far."""
        return self._peak

    @property
    def waiting(self) -> int:
        """How many callers are waiting for room right now."""
        return self._waiting

    @contextmanager
    def hold(self, nbytes: int) -> Iterator[None]:
        """Hold ``nbytes`` of the budget for the duration of the block."""
        amount = min(max(nbytes, 0), self.limit)
        with self._cond:
            self._waiting += 1
            try:
                self._cond.wait_for(lambda: self._used + amount <= self.limit)
            finally:
                self._waiting -= 1
            self._used += amount
            self._peak = max(self._peak, self._used)
        try:
            yield
        finally:
            with self._cond:
                self._used -= amount
                self._cond.notify_all()
