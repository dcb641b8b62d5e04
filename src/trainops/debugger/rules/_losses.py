"""Rules on the losses: LossNotDecreasing, Overfit, Overtraining.

Losses are the scalar tensors of the ``losses`` collection (the hook saves them always), and
those of ``collection_names`` / ``tensor_regex`` where a rule takes them. A loss saved in
``EVAL`` mode is the validation loss, one saved in ``TRAIN`` mode the training loss.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainops.debugger.modes import ModeKeys, parse_mode
from trainops.debugger.rules._base import UNAVAILABLE, BuiltinRule, checked_regexes
from trainops.debugger.rules._params import as_bool, as_float, as_int, as_names

__all__ = ["LossNotDecreasing", "Overfit", "Overtraining"]

_LOSSES = "losses"
_SEARCH_ORDER = (ModeKeys.EVAL, ModeKeys.TRAIN)


class _LossRule(BuiltinRule):
    """A rule on scalar loss series, by mode."""

    def losses(self, collections: list[str], regexes: list[str]) -> list[str]:
        return self.tensors(collections, regexes) or self.tensors([_LOSSES])

    def series(self, tensor: str, mode: ModeKeys) -> list[int]:
        """The steps of ``tensor`` in ``mode`` (mode steps; global steps for GLOBAL)."""
        try:
            found = self.base_trial.tensor(tensor).steps(mode=mode)
        except UNAVAILABLE:
            return []
        return sorted(found)

    def scalar(self, tensor: str, step: int, mode: ModeKeys) -> float | None:
        value = self.value(tensor, step, mode=mode)
        if value is None or value.size == 0:
            return None
        return float(np.mean(value))

    def mode_of(self, step: int) -> tuple[ModeKeys, int]:
        """The mode of global step ``step`` and its step within the mode."""
        try:
            return parse_mode(self.base_trial.mode(step)), int(self.base_trial.mode_step(step))
        except (*UNAVAILABLE, ValueError, KeyError):
            return ModeKeys.GLOBAL, step


class LossNotDecreasing(_LossRule):
    """Every ``num_steps`` steps, compares a loss with its value at the newest saved step at
    least ``num_steps`` earlier: fires when it fell by less than ``diff_percent`` % (or rose by
    more than ``increase_threshold_percent`` %). Without ``mode`` it reads EVAL losses when
    there are some, else TRAIN, else GLOBAL."""

    name = "LossNotDecreasing"

    def __init__(
        self,
        base_trial: Any,
        collection_names: Any = None,
        tensor_regex: Any = None,
        use_losses_collection: Any = True,
        num_steps: Any = 10,
        diff_percent: Any = 0.1,
        increase_threshold_percent: Any = 5,
        mode: Any = None,
    ) -> None:
        super().__init__(base_trial)
        self.collection_names = as_names(self.name, "collection_names", collection_names)
        regexes = as_names(self.name, "tensor_regex", tensor_regex)
        self.tensor_regex = checked_regexes(self.name, "tensor_regex", regexes)
        if as_bool(self.name, "use_losses_collection", use_losses_collection):
            self.collection_names.append(_LOSSES)
        self.num_steps = as_int(self.name, "num_steps", num_steps, minimum=1)
        self.diff_percent = as_float(self.name, "diff_percent", diff_percent)
        self.increase = as_float(
            self.name, "increase_threshold_percent", increase_threshold_percent
        )
        self.mode = None if mode in (None, "", "None") else parse_mode(mode)
        self._next: dict[tuple[str, ModeKeys], int] = {}
        self._modes: dict[str, ModeKeys] = {}  # the best mode a loss was seen in (EVAL first)
        self._oldest: dict[tuple[str, ModeKeys], int] = {}  # the oldest global step it needs

    def keep_from(self, next_step: int) -> int:
        present = self.present()
        self._oldest = {k: s for k, s in self._oldest.items() if k[0] in present}
        return min(self._oldest.values(), default=next_step)

    def invoke_at_step(self, step: int) -> bool:
        step_mode, mode_step = self.mode_of(step)
        for tensor in self.tensors(self.collection_names, self.tensor_regex):
            mode = self._mode_for(tensor)
            if mode is None:
                continue
            at = step if mode == ModeKeys.GLOBAL else mode_step
            if mode not in (ModeKeys.GLOBAL, step_mode):
                continue
            self._keep((tensor, mode), at, step)
            if at < self._next.get((tensor, mode), 0):
                continue
            if self._check(tensor, mode, at):
                return True
        return False

    def _mode_for(self, tensor: str) -> ModeKeys | None:
        """The mode of ``tensor``'s series: ``mode`` if given, else EVAL once it was seen in
        EVAL, else TRAIN, else GLOBAL (remembered: the trial forgets old steps)."""
        if self.mode is not None:
            return self.mode
        seen = self._modes.get(tensor)
        for mode in (*_SEARCH_ORDER, ModeKeys.GLOBAL):
            if mode == seen:
                return mode
            if self.series(tensor, mode):
                self._modes[tensor] = mode
                return mode
        return None

    def _keep(self, key: tuple[str, ModeKeys], at: int, step: int) -> None:
        """Remember the oldest step a later check of ``key`` may compare with: the newest
        saved step at least ``num_steps`` before the next check (the first saved one until
        there is such a step)."""
        series = self.series(*key)
        threshold = max(self._next.get(key, 0), at + 1) - self.num_steps
        base = [s for s in series if s <= threshold]
        oldest = base[-1] if base else series[0] if series else at
        found = self._global(key[1], oldest)
        self._oldest[key] = step if found is None else found

    def _global(self, mode: ModeKeys, mode_step: int) -> int | None:
        if mode == ModeKeys.GLOBAL:
            return mode_step
        try:
            return int(self.base_trial.global_step(mode, mode_step))
        except (*UNAVAILABLE, ValueError, KeyError):
            return None

    def _check(self, tensor: str, mode: ModeKeys, at: int) -> bool:
        series = self.series(tensor, mode)
        earlier = [s for s in series if s <= at - self.num_steps]
        current = self.scalar(tensor, at, mode) if at in series else None
        if not earlier or current is None:
            return False
        self._next[(tensor, mode)] = at + self.num_steps
        before = self.scalar(tensor, earlier[-1], mode)
        if before is None or before == 0:
            return False
        change = 100.0 * (before - current) / abs(before)
        if change < -self.increase:
            why = f"rose {-change:.3g} % (more than {self.increase:g} %)"
        elif change <= self.diff_percent:
            why = f"fell {change:.3g} % (not more than diff_percent {self.diff_percent:g} %)"
        else:
            return False
        return self.found(
            f"{tensor} ({mode.name}) {why} from step {earlier[-1]} ({before:.4g}) "
            f"to step {at} ({current:.4g})",
            tensor=tensor,
            mode=mode.name,
            step=at,
            before=before,
            after=current,
        )


class Overfit(_LossRule):
    """At each step with a validation (EVAL) loss from ``start_step`` on: fires when (validation
    loss - training loss) / training loss exceeds ``ratio_threshold`` at ``patience``
    validations in a row; the training loss is the mean of the TRAIN losses saved since the
    previous validation (the latest one when none)."""

    name = "Overfit"

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: Any = None,
        start_step: Any = 0,
        patience: Any = 1,
        ratio_threshold: Any = 0.1,
    ) -> None:
        super().__init__(base_trial)
        regexes = as_names(self.name, "tensor_regex", tensor_regex)
        self.tensor_regex = checked_regexes(self.name, "tensor_regex", regexes)
        self.start_step = as_int(self.name, "start_step", start_step)
        self.patience = as_int(self.name, "patience", patience, minimum=1)
        self.ratio_threshold = as_float(self.name, "ratio_threshold", ratio_threshold)
        self._in_a_row: dict[str, int] = {}
        #: Per loss, the TRAIN losses since the previous validation (sum, count) and the
        #: latest one: the rule's own state, read at each TRAIN step (no earlier step kept).
        self._since: dict[str, tuple[float, int]] = {}
        self._latest: dict[str, float] = {}

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.mode_of(step)
        if mode == ModeKeys.TRAIN:
            self._add_training_losses(mode_step)
        if mode != ModeKeys.EVAL or step < self.start_step:
            return False
        for tensor in self.losses([], self.tensor_regex):
            validation = self.scalar(tensor, mode_step, ModeKeys.EVAL)
            training = self._training_loss(tensor)
            if validation is None or training is None or training == 0:
                continue
            ratio = (validation - training) / abs(training)
            count = self._in_a_row.get(tensor, 0) + 1 if ratio > self.ratio_threshold else 0
            self._in_a_row[tensor] = count
            if count >= self.patience:
                return self.found(
                    f"{tensor}: validation loss {validation:.4g} is {ratio:.3g}x above the "
                    f"training loss {training:.4g} at step {step} ({count} validations in a row; "
                    f"ratio_threshold {self.ratio_threshold:g})",
                    tensor=tensor,
                    step=step,
                    ratio=ratio,
                )
        return False

    def _add_training_losses(self, mode_step: int) -> None:
        for tensor in self.losses([], self.tensor_regex):
            value = self.scalar(tensor, mode_step, ModeKeys.TRAIN)
            if value is not None:
                total, count = self._since.get(tensor, (0.0, 0))
                self._since[tensor] = (total + value, count + 1)
                self._latest[tensor] = value

    def _training_loss(self, tensor: str) -> float | None:
        """The mean TRAIN loss since the previous validation (the latest one when none)."""
        total, count = self._since.pop(tensor, (0.0, 0))
        return total / count if count else self._latest.get(tensor)


class Overtraining(_LossRule):
    """Fires once the training loss has not improved by ``delta`` for ``patience_train`` saved
    TRAIN steps and the validation loss has not for ``patience_validation`` saved EVAL steps."""

    name = "Overtraining"

    def __init__(
        self,
        base_trial: Any,
        patience_train: Any = 5,
        patience_validation: Any = 10,
        delta: Any = 0.01,
    ) -> None:
        super().__init__(base_trial)
        self.patience = {
            ModeKeys.TRAIN: as_int(self.name, "patience_train", patience_train, minimum=1),
            ModeKeys.EVAL: as_int(self.name, "patience_validation", patience_validation, minimum=1),
        }
        self.delta = as_float(self.name, "delta", delta)
        self._best: dict[tuple[str, ModeKeys], float] = {}
        self._stale: dict[tuple[str, ModeKeys], int] = {}

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = self.mode_of(step)
        if mode not in self.patience:
            return False
        for tensor in self.losses([], []):
            value = self.scalar(tensor, mode_step, mode)
            if value is None:
                continue
            self._update((tensor, mode), value)
            stale_train = self._stale.get((tensor, ModeKeys.TRAIN), 0)
            stale_eval = self._stale.get((tensor, ModeKeys.EVAL), 0)
            if (
                stale_train >= self.patience[ModeKeys.TRAIN]
                and stale_eval >= self.patience[ModeKeys.EVAL]
            ):
                return self.found(
                    f"{tensor}: no improvement by {self.delta:g} for {stale_train} training and "
                    f"{stale_eval} validation steps (at step {step})",
                    tensor=tensor,
                    step=step,
                    stale_train=stale_train,
                    stale_eval=stale_eval,
                )
        return False

    def _update(self, key: tuple[str, ModeKeys], value: float) -> None:
        best = self._best.get(key)
        if best is None or value < best - self.delta:
            self._best[key], self._stale[key] = value, 0
        else:
            self._stale[key] = self._stale.get(key, 0) + 1
