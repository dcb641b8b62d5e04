"""Rules on how a network trains: VanishingGradient, WeightUpdateRatio,
PoorWeightInitialization.

They read the ``gradients`` and ``weights`` collections the hook saves (and, for
PoorWeightInitialization, the inputs of the activation layers and the losses).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainops.debugger.rules._activations import layer_tensors, type_collections
from trainops.debugger.rules._base import BuiltinRule, checked_regexes
from trainops.debugger.rules._params import as_float, as_int, as_names

__all__ = ["PoorWeightInitialization", "VanishingGradient", "WeightUpdateRatio"]

_GRADIENTS = "gradients"
_WEIGHTS = "weights"
_LOSSES = "losses"


class VanishingGradient(BuiltinRule):
    """Fires when the mean absolute value of a gradient is below ``threshold``."""

    name = "VanishingGradient"

    def __init__(self, base_trial: Any, threshold: Any = 1e-07) -> None:
        super().__init__(base_trial)
        self.threshold = as_float(self.name, "threshold", threshold)

    def invoke_at_step(self, step: int) -> bool:
        for tensor in self.tensors([_GRADIENTS]):
            mean = self.reduction(tensor, step, "mean", absolute=True)
            if mean is not None and mean < self.threshold:
                return self.found(
                    f"gradient {tensor} vanishes at step {step}: mean |g| = {mean:.3g} "
                    f"< threshold {self.threshold:g}",
                    tensor=tensor,
                    step=step,
                    mean_abs=mean,
                )
        return False


class WeightUpdateRatio(BuiltinRule):
    """Fires when a weight's update (l2 of w(step) - w(step - 1)) against the weight (l2 of
    w(step - 1)) is above ``large_threshold`` or below ``small_threshold``. It needs weights
    saved at two consecutive steps (save_interval 1, or save_steps with pairs); with
    ``num_steps`` it looks every ``num_steps`` steps only."""

    name = "WeightUpdateRatio"

    def __init__(
        self,
        base_trial: Any,
        num_steps: Any = None,
        large_threshold: Any = 10.0,
        small_threshold: Any = 1e-08,
        epsilon: Any = 1e-09,
    ) -> None:
        super().__init__(base_trial)
        none = num_steps is None or str(num_steps).strip() in ("", "None")
        self.num_steps = None if none else as_int(self.name, "num_steps", num_steps, minimum=1)
        self.large_threshold = as_float(self.name, "large_threshold", large_threshold)
        self.small_threshold = as_float(self.name, "small_threshold", small_threshold)
        self.epsilon = as_float(self.name, "epsilon", epsilon)

    def keep_from(self, next_step: int) -> int:
        return next_step - 1  # it compares a step with the one before

    def invoke_at_step(self, step: int) -> bool:
        if step < 1 or (self.num_steps is not None and step % self.num_steps):
            return False
        for tensor in self.tensors([_WEIGHTS]):
            now, before = self.value(tensor, step), self.value(tensor, step - 1)
            if now is None or before is None or now.shape != before.shape:
                continue
            update = float(np.linalg.norm((now - before).ravel()))
            ratio = update / (float(np.linalg.norm(before.ravel())) + self.epsilon)
            if ratio > self.large_threshold or ratio < self.small_threshold:
                side = "large" if ratio > self.large_threshold else "small"
                return self.found(
                    f"update of {tensor} is too {side} at step {step}: |dw|/|w| = {ratio:.3g} "
                    f"(thresholds {self.small_threshold:g}..{self.large_threshold:g})",
                    tensor=tensor,
                    step=step,
                    ratio=ratio,
                )
        return False


class PoorWeightInitialization(BuiltinRule):
    """Looks at the first ``steps`` steps only. Fires when the variances of the activation
    layers' inputs (``activation_inputs_regex``) differ by more than a factor ``threshold``
    between layers, when a gradient's spread (95th minus 5th percentile) is below
    ``distribution_range``, or when the loss has not decreased after ``patience`` saved
    steps."""

    name = "PoorWeightInitialization"

    def __init__(
        self,
        base_trial: Any,
        activation_inputs_regex: Any = ".*relu_input",
        threshold: Any = 10.0,
        distribution_range: Any = 0.001,
        patience: Any = 5,
        steps: Any = 10,
    ) -> None:
        super().__init__(base_trial)
        regexes = as_names(self.name, "activation_inputs_regex", activation_inputs_regex)
        self.regexes = checked_regexes(self.name, "activation_inputs_regex", regexes)
        self.collections = type_collections(self.regexes)  # relu_input for .*relu_input
        self.threshold = as_float(self.name, "threshold", threshold)
        self.distribution_range = as_float(self.name, "distribution_range", distribution_range)
        self.patience = as_int(self.name, "patience", patience, minimum=1)
        self.steps = as_int(self.name, "steps", steps)

    def keep_from(self, next_step: int) -> int:
        return 0 if next_step <= self.steps else next_step  # the first loss, in its steps

    def invoke_at_step(self, step: int) -> bool:
        if step > self.steps:
            return False
        return self._variances(step) or self._gradients(step) or self._loss(step)

    def _variances(self, step: int) -> bool:
        variances = {}
        for tensor in layer_tensors(self, self.collections, self.regexes):
            variance = self.reduction(tensor, step, "variance")
            if variance is not None and variance == variance:
                variances[tensor] = variance
        if len(variances) < 2:
            return False
        low, high = min(variances.values()), max(variances.values())
        if high > 0 and (low <= 0 or high / low > self.threshold):
            ratio = float("inf") if low <= 0 else high / low
            return self.found(
                f"variances of activation inputs differ {ratio:.3g}x across layers at step "
                f"{step} (min {low:.3g}, max {high:.3g}; threshold {self.threshold:g})",
                step=step,
                ratio=ratio,
                variances=variances,
            )
        return False

    def _gradients(self, step: int) -> bool:
        for tensor in self.tensors([_GRADIENTS]):
            value = self.value(tensor, step)
            if value is None or value.size < 2:
                continue
            low, high = np.percentile(value.astype(np.float64), [5, 95])
            spread = float(high - low)
            if spread < self.distribution_range:
                return self.found(
                    f"gradient {tensor} barely spreads at step {step}: p95 - p5 = {spread:.3g} "
                    f"< distribution_range {self.distribution_range:g}",
                    tensor=tensor,
                    step=step,
                    spread=spread,
                )
        return False

    def _loss(self, step: int) -> bool:
        for tensor in self.tensors([_LOSSES]):
            saved = [s for s in self.base_trial.tensor(tensor).steps() if s <= step]
            if len(saved) <= self.patience:
                continue
            first = self.value(tensor, saved[0])
            last = self.value(tensor, saved[-1])
            if first is None or last is None:
                continue
            if float(np.mean(last)) >= float(np.mean(first)):
                return self.found(
                    f"loss {tensor} has not decreased in the first {len(saved)} saved steps "
                    f"({float(np.mean(first)):.4g} at step {saved[0]}, "
                    f"{float(np.mean(last)):.4g} at step {saved[-1]})",
                    tensor=tensor,
                    step=step,
                )
        return False
