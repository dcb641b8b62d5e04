"""Rules on a model's inputs and on time: CheckInputImages, NLPSequenceRatio,
StalledTrainingRule."""

from __future__ import annotations

from typing import Any

import numpy as np

from trainops.debugger.rules._base import BuiltinRule, checked_regexes
from trainops.debugger.rules._params import as_bool, as_float, as_int, as_names

__all__ = ["CheckInputImages", "NLPSequenceRatio", "StalledTrainingRule"]

_MAX_TOKENS = 100


class CheckInputImages(BuiltinRule):
    """Counts the input images (``regex``: a ``(batch, channels, ...)`` tensor, the channel on
    axis ``channel``) over the steps; once ``threshold_samples`` are counted, fires when the
    mean of a channel is further from 0 than ``threshold_mean`` (inputs not normalized)."""

    name = "CheckInputImages"

    def __init__(
        self,
        base_trial: Any,
        threshold_mean: Any = 0.2,
        threshold_samples: Any = 500,
        regex: Any = ".*hybridsequential0_input_0",
        channel: Any = 1,
    ) -> None:
        super().__init__(base_trial)
        self.threshold_mean = as_float(self.name, "threshold_mean", threshold_mean)
        self.threshold_samples = as_int(
            self.name, "threshold_samples", threshold_samples, minimum=1
        )
        self.regexes = checked_regexes(self.name, "regex", as_names(self.name, "regex", regex))
        self.channel = as_int(self.name, "channel", channel)
        self.sums: dict[int, float] = {}
        self.counts: dict[int, int] = {}
        self.images = 0

    def invoke_at_step(self, step: int) -> bool:
        for tensor in self.tensors(tensor_regex=self.regexes):
            value = self.value(tensor, step)
            if value is None or value.ndim <= self.channel or value.ndim < 2:
                continue
            per_channel = np.moveaxis(value.astype(np.float64), self.channel, 0)
            per_channel = per_channel.reshape(per_channel.shape[0], -1)
            for index, row in enumerate(per_channel[:_MAX_TOKENS]):
                self.sums[index] = self.sums.get(index, 0.0) + float(row.sum())
                self.counts[index] = self.counts.get(index, 0) + int(row.size)
            self.images += int(value.shape[0])
        if self.images < self.threshold_samples:
            return False
        for index, total in sorted(self.sums.items()):
            mean = total / max(self.counts[index], 1)
            if abs(mean) > self.threshold_mean:
                return self.found(
                    f"input images are not normalized: channel {index} has mean {mean:.4g} over "
                    f"{self.images} images at step {step} (threshold_mean {self.threshold_mean:g})",
                    step=step,
                    channel=index,
                    mean=mean,
                    images=self.images,
                )
        return False


class NLPSequenceRatio(BuiltinRule):
    """Fires when the share of a token (``token_values``, comma-separated ids) in the input
    sequences (``tensor_regex``) at a step is above its ``token_thresholds_percent``."""

    name = "NLPSequenceRatio"

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: Any = ".*embedding0_input_0",
        token_values: Any = "0",  # noqa: S107 - token ids, not secrets
        token_thresholds_percent: Any = "50",  # noqa: S107
    ) -> None:
        super().__init__(base_trial)
        regexes = as_names(self.name, "tensor_regex", tensor_regex)
        self.regexes = checked_regexes(self.name, "tensor_regex", regexes)
        tokens = as_names(self.name, "token_values", _text(token_values))
        limits = as_names(self.name, "token_thresholds_percent", _text(token_thresholds_percent))
        if not tokens or len(tokens) > _MAX_TOKENS:
            raise ValueError(f"{self.name}.token_values must name 1 to {_MAX_TOKENS} tokens")
        if len(limits) not in (1, len(tokens)):
            raise ValueError(
                f"{self.name}.token_thresholds_percent must give one threshold, or one per token"
            )
        limits = limits * len(tokens) if len(limits) == 1 else limits
        self.thresholds = {
            as_float(self.name, "token_values", t): as_float(
                self.name, "token_thresholds_percent", p
            )
            for t, p in zip(tokens, limits, strict=True)
        }

    def invoke_at_step(self, step: int) -> bool:
        for tensor in self.tensors(tensor_regex=self.regexes):
            value = self.value(tensor, step)
            if value is None or not value.size:
                continue
            for token, threshold in self.thresholds.items():
                share = 100.0 * float(np.count_nonzero(value == token)) / value.size
                if share > threshold:
                    return self.found(
                        f"token {token:g} is {share:.3g} % of {tensor} at step {step} "
                        f"(threshold {threshold:g} %)",
                        tensor=tensor,
                        step=step,
                        token=token,
                        percent=share,
                    )
        return False


class StalledTrainingRule(BuiltinRule):
    """Fires when no new step has been saved for ``threshold`` seconds (from the first
    evaluation on). With ``stop_training_on_fire`` the job is stopped when it fires, as
    SageMaker's rule does."""

    name = "StalledTrainingRule"

    def __init__(
        self,
        base_trial: Any,
        threshold: Any = 1800,
        stop_training_on_fire: Any = False,
        training_job_name_prefix: Any = None,
    ) -> None:
        super().__init__(base_trial)
        self.threshold = as_float(self.name, "threshold", threshold)
        self.stop_training_on_fire = as_bool(
            self.name, "stop_training_on_fire", stop_training_on_fire
        )
        self.training_job_name_prefix = training_job_name_prefix
        self._since: float | None = None
        self._last_step: int | None = None
        self._moved = False

    def invoke_at_step(self, step: int) -> bool:
        self._last_step, self._moved = step, True
        return False

    def check_idle(self, now: float) -> bool:
        if self._since is None or self._moved:
            self._since, self._moved = now, False
            return False
        idle = now - self._since
        if idle < self.threshold:
            return False
        last = "no step yet" if self._last_step is None else f"the last was step {self._last_step}"
        return self.found(
            f"no new step for {idle:.0f} s ({last}; threshold {self.threshold:g} s)",
            idle_seconds=idle,
            last_step=self._last_step,
        )


def _text(value: Any) -> Any:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
