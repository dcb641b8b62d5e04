"""``Tensor``: one saved tensor across steps and workers, its values read on demand.

A tensor knows where each of its records is (global step -> worker -> location); values are
read from the event file when asked for, one bounded record at a time. Reductions saved by the
hook (``smdebug/reductions/...``) belong to the tensor they reduce: :meth:`Tensor.reduction_value`
returns a saved reduction, or computes it from the raw value when only that was saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from trainops.debugger.exceptions import (
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from trainops.debugger.format import compute_reduction
from trainops.debugger.modes import ModeKeys, parse_mode

if TYPE_CHECKING:
    from trainops.debugger.trial._trial import Trial

__all__ = ["Location", "Tensor"]


@dataclass(frozen=True)
class Location:
    """Where one record is: the event file's key, the record's offset and framed length."""

    event_file: str
    start: int
    length: int


class Tensor:
    """A named tensor of a :class:`~trainops.debugger.trial.Trial`."""

    def __init__(self, name: str, trial: Trial) -> None:
        self.name = name
        self.trial = trial
        self._raw: dict[int, dict[str, Location]] = {}
        self._reductions: dict[int, dict[str, dict[tuple[str, bool], Location]]] = {}
        self._shapes: dict[int, dict[str, tuple[int, ...]]] = {}

    # -- loading (the trial calls these) --------------------------------------------------
    def _add_raw(self, step: int, worker: str, location: Location) -> None:
        self._raw.setdefault(step, {})[worker] = location

    def _add_reduction(
        self, step: int, worker: str, key: tuple[str, bool], location: Location
    ) -> None:
        self._reductions.setdefault(step, {}).setdefault(worker, {})[key] = location

    def _add_shape(self, step: int, worker: str, shape: tuple[int, ...]) -> None:
        self._shapes.setdefault(step, {})[worker] = shape

    def _forget_before(self, step: int) -> int:
        """Drop the records of global steps before ``step``; how many were dropped."""
        dropped = 0
        for table in (self._raw, self._shapes):
            for at in [at for at in table if at < step]:
                dropped += len(table.pop(at))
        for at in [at for at in self._reductions if at < step]:
            dropped += sum(len(by_key) for by_key in self._reductions.pop(at).values())
        return dropped

    def _empty(self) -> bool:
        return not (self._raw or self._reductions or self._shapes)

    def _global_steps(self) -> set[int]:
        return set(self._raw) | set(self._reductions) | set(self._shapes)

    # -- the API ---------------------------------------------------------------------------
    def steps(
        self, mode: ModeKeys | int | str = ModeKeys.GLOBAL, show_incomplete_steps: bool = False
    ) -> list[int]:
        """The steps of ``mode`` (mode steps; global steps for GLOBAL) holding this tensor."""
        self.trial.maybe_refresh()
        return self.trial._steps_of(self._global_steps(), parse_mode(mode), show_incomplete_steps)

    def workers(self, step: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL) -> list[str]:
        by_worker = self._at(step, parse_mode(mode))
        return sorted(by_worker)

    def value(
        self, step: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
    ) -> np.ndarray:
        """The tensor's value at ``step`` of ``mode`` (from ``worker``, else the first)."""
        mode = parse_mode(mode)
        self._at(step, mode)
        raw = self._raw.get(self._global(step, mode), {})
        chosen = self._pick_worker(raw, worker)
        if chosen is None:
            has_reductions = bool(self._reductions.get(self._global(step, mode)))
            raise TensorUnavailableForStep(self.name, step, mode, has_reductions)
        return self.trial._read_value(raw[chosen], self.name)

    def values(
        self, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[int, np.ndarray]:
        mode = parse_mode(mode)
        return {step: self.value(step, mode, worker) for step in self.steps(mode)}

    def reduction_value(
        self,
        step: int,
        reduction_name: str,
        mode: ModeKeys | int | str = ModeKeys.GLOBAL,
        worker: str | None = None,
        abs: bool = False,
    ) -> float:
        """A saved reduction at ``step``, or one computed from the saved raw value."""
        mode = parse_mode(mode)
        self._at(step, mode)
        at = self._global(step, mode)
        saved = self._reductions.get(at, {})
        chosen = self._pick_worker(saved, worker) if saved else None
        if chosen is not None and (reduction_name, abs) in saved[chosen]:
            value = self.trial._read_value(saved[chosen][(reduction_name, abs)], None)
            return float(np.asarray(value).reshape(-1)[0])
        if self._raw.get(at):
            return compute_reduction(self.value(step, mode, worker), reduction_name, abs)
        raise TensorUnavailableForStep(self.name, step, mode, bool(saved))

    def reduction_values(
        self, step: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[tuple[str, bool], float]:
        """Every reduction saved for ``step``: ``{(name, abs): value}``."""
        mode = parse_mode(mode)
        self._at(step, mode)
        saved = self._reductions.get(self._global(step, mode), {})
        chosen = self._pick_worker(saved, worker) if saved else None
        keys = sorted(saved[chosen]) if chosen is not None else []
        return {key: self.reduction_value(step, key[0], mode, chosen, key[1]) for key in keys}

    def shape(
        self, step: int, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
    ) -> tuple[int, ...]:
        mode = parse_mode(mode)
        self._at(step, mode)
        shapes = self._shapes.get(self._global(step, mode), {})
        chosen = self._pick_worker(shapes, worker) if shapes else None
        if chosen is not None:
            return shapes[chosen]
        return tuple(np.shape(self.value(step, mode, worker)))

    def shapes(
        self, mode: ModeKeys | int | str = ModeKeys.GLOBAL, worker: str | None = None
    ) -> dict[int, tuple[int, ...]]:
        mode = parse_mode(mode)
        return {step: self.shape(step, mode, worker) for step in self.steps(mode)}

    def prev_steps(
        self, step: int, n: int | None = None, mode: ModeKeys | int | str = ModeKeys.GLOBAL
    ) -> list[int]:
        """The steps up to and including ``step`` (the last ``n`` of them if ``n`` is given)."""
        earlier = [s for s in self.steps(mode) if s <= step]
        return earlier if n is None else earlier[-n:] if n > 0 else []

    # -- helpers ---------------------------------------------------------------------------
    def _global(self, step: int, mode: ModeKeys) -> int:
        found = self.trial._global_of(step, mode)
        return -1 if found is None else found

    def _has(self, at: int) -> bool:
        return at in self._raw or at in self._reductions or at in self._shapes

    def _at(self, step: int, mode: ModeKeys) -> dict[str, object]:
        """This tensor's records at ``step``, or the right exception. The trial looks for new
        files only when the step is not there complete yet (as smdebug's tensor does): reading
        many values of loaded steps costs no listing."""
        at = self.trial._global_of(step, mode)
        if at is None or not self.trial._complete(at):
            self.trial.maybe_refresh()
            at = self.trial._global_of(step, mode)
        if at is not None and self._has(at):
            return {
                **self._raw.get(at, {}),
                **self._reductions.get(at, {}),
                **self._shapes.get(at, {}),
            }
        if at is None and not self.trial._step_passed(step, mode):
            raise StepNotYetAvailable(step, mode)
        if at is None:
            raise StepUnavailable(step, mode)
        raise TensorUnavailableForStep(self.name, step, mode)

    @staticmethod
    def _pick_worker(by_worker: Mapping[str, object], worker: str | None) -> str | None:
        if worker is not None:
            return worker if worker in by_worker else None
        return min(by_worker) if by_worker else None

    def __repr__(self) -> str:
        return f"Tensor({self.name!r})"
