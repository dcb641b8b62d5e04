"""The steps a trial has loaded: their modes and mode steps, their workers, which are complete.

A step is complete once ``num_workers`` workers wrote it, or once a later step is complete; the
trial adds "or once the job has ended". As in smdebug, when more than ``wait_window`` steps are
incomplete the older half counts as complete (a worker that died must not hold every later step).
Completeness is kept up to date as steps arrive, not recomputed over all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from trainops.debugger.modes import ModeKeys

__all__ = ["StepBook"]


@dataclass
class _Step:
    mode: ModeKeys
    mode_step: int
    workers: set[str] = field(default_factory=set)


class StepBook:
    """Global step -> mode, mode step and workers; and the last complete step."""

    def __init__(self, wait_window: int = 1000) -> None:
        self.steps: dict[int, _Step] = {}
        self.by_mode: dict[ModeKeys, dict[int, int]] = {mode: {} for mode in ModeKeys}
        self.workers: set[str] = set()
        self.last_complete = -1
        self.num_workers = 1
        self._wait_window = wait_window
        self._incomplete: set[int] = set()

    def add(self, step: int, worker: str, mode: ModeKeys, mode_step: int) -> int:
        """File ``worker``'s ``step``; 1 if it is new (a record the book holds), else 0."""
        record = self.steps.setdefault(step, _Step(mode, mode_step))
        new = int(worker not in record.workers)
        record.workers.add(worker)
        self.workers.add(worker)
        self.by_mode[ModeKeys.GLOBAL][step] = step
        if mode != ModeKeys.GLOBAL:
            self.by_mode[mode][mode_step] = step
        self._settle(step)
        return new

    def forget_before(self, step: int) -> int:
        """Drop the global steps before ``step`` (the last complete step stays as it is);
        how many step records of workers were dropped."""
        old = [at for at in self.steps if at < step]
        dropped = 0
        for at in old:
            record = self.steps.pop(at)
            dropped += len(record.workers)
            self.by_mode[ModeKeys.GLOBAL].pop(at, None)
            if (
                record.mode != ModeKeys.GLOBAL
                and self.by_mode[record.mode].get(record.mode_step) == at
            ):
                del self.by_mode[record.mode][record.mode_step]
        self._incomplete = {s for s in self._incomplete if s >= step}
        return dropped

    def set_num_workers(self, num_workers: int) -> None:
        if num_workers != self.num_workers:
            self.num_workers = num_workers
            self._incomplete = set()
            self.last_complete = -1  # counted against the wrong number of workers until now
            for step in sorted(self.steps):
                self._settle(step)

    def _settle(self, step: int) -> None:
        if len(self.steps[step].workers) >= self.num_workers:
            self._incomplete.discard(step)
            self.last_complete = max(self.last_complete, step)
        elif step > self.last_complete:
            self._incomplete.add(step)
        self._incomplete = {s for s in self._incomplete if s > self.last_complete}
        if len(self._incomplete) > self._wait_window:
            waiting = sorted(self._incomplete)
            self.last_complete = waiting[len(waiting) // 2]
            self._incomplete = {s for s in waiting if s > self.last_complete}

    def complete(self, step: int, ended: bool) -> bool:
        return ended or step <= self.last_complete

    def global_of(self, step: int, mode: ModeKeys) -> int | None:
        return self.by_mode[mode].get(step)

    def steps_of(
        self, global_steps: Iterable[int], mode: ModeKeys, show_incomplete: bool, ended: bool
    ) -> list[int]:
        """The steps of ``global_steps`` in ``mode`` (mode steps, or global for GLOBAL)."""
        out = []
        for step in global_steps:
            if not show_incomplete and not self.complete(step, ended):
                continue
            record = self.steps[step]
            if mode == ModeKeys.GLOBAL:
                out.append(step)
            elif record.mode == mode:
                out.append(record.mode_step)
        return sorted(out)

    def passed(self, step: int, mode: ModeKeys, ended: bool) -> bool:
        """Whether ``step`` of ``mode`` will never come (a later one is complete, or the end)."""
        if ended:
            return True
        return any(m > step and g <= self.last_complete for m, g in self.by_mode[mode].items())
