"""Rules on any tensor's values: ExplodingTensor, AllZero, UnchangedTensor, TensorVariance,
SimilarAcrossRuns.

Each takes ``collection_names`` and ``tensor_regex`` (comma-separated strings or lists) and
looks at the union of the tensors they name at the step it is invoked on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainops.debugger.rules._base import BuiltinRule, checked_regexes
from trainops.debugger.rules._params import (
    as_bool,
    as_float,
    as_int,
    as_names,
    as_optional_float,
)

__all__ = ["AllZero", "ExplodingTensor", "SimilarAcrossRuns", "TensorVariance", "UnchangedTensor"]


class _SelectingRule(BuiltinRule):
    """A rule over the tensors of ``collection_names`` and ``tensor_regex``."""

    all_if_none: bool = True

    def _select(self, collection_names: Any, tensor_regex: Any) -> None:
        self.collection_names = as_names(self.name, "collection_names", collection_names)
        self.tensor_regex = checked_regexes(
            self.name, "tensor_regex", as_names(self.name, "tensor_regex", tensor_regex)
        )

    def chosen(self, trial: Any = None) -> list[str]:
        return self.tensors(
            self.collection_names, self.tensor_regex, trial=trial, all_if_none=self.all_if_none
        )


class ExplodingTensor(_SelectingRule):
    """Fires when a tensor holds NaN (or, unless ``only_nan``, an infinity)."""

    name = "ExplodingTensor"

    def __init__(
        self,
        base_trial: Any,
        collection_names: Any = None,
        tensor_regex: Any = None,
        only_nan: Any = False,
    ) -> None:
        super().__init__(base_trial)
        self._select(collection_names, tensor_regex)
        self.only_nan = as_bool(self.name, "only_nan", only_nan)

    def invoke_at_step(self, step: int) -> bool:
        for tensor in self.chosen():
            value = self.value(tensor, step)
            if value is None or not np.issubdtype(value.dtype, np.inexact):
                continue
            nans = int(np.count_nonzero(np.isnan(value)))
            infs = 0 if self.only_nan else int(np.count_nonzero(np.isinf(value)))
            if nans or infs:
                return self.found(
                    f"{tensor} holds {nans} NaN and {infs} infinite values at step {step}",
                    tensor=tensor,
                    step=step,
                    nan=nans,
                    inf=infs,
                )
        return False


class AllZero(_SelectingRule):
    """Fires when at least ``threshold`` % of a tensor's values are zero."""

    name = "AllZero"

    def __init__(
        self,
        base_trial: Any,
        collection_names: Any = None,
        tensor_regex: Any = None,
        threshold: Any = 100,
    ) -> None:
        super().__init__(base_trial)
        self._select(collection_names, tensor_regex)
        self.threshold = as_float(self.name, "threshold", threshold)

    def invoke_at_step(self, step: int) -> bool:
        for tensor in self.chosen():
            value = self.value(tensor, step)
            if value is None or value.size == 0:
                continue
            zeros = 100.0 * float(np.count_nonzero(value == 0)) / value.size
            if zeros >= self.threshold:
                return self.found(
                    f"{zeros:.4g} % of {tensor} is zero at step {step} "
                    f"(threshold {self.threshold:g} %)",
                    tensor=tensor,
                    step=step,
                    zero_percent=zeros,
                )
        return False


class UnchangedTensor(_SelectingRule):
    """Fires when a tensor is the same (``numpy.allclose``) over its last ``num_steps`` saved
    steps up to this one."""

    name = "UnchangedTensor"

    def __init__(
        self,
        base_trial: Any,
        collection_names: Any = None,
        tensor_regex: Any = None,
        num_steps: Any = 3,
        rtol: Any = 1e-05,
        atol: Any = 1e-08,
        equal_nan: Any = False,
    ) -> None:
        super().__init__(base_trial)
        self._select(collection_names, tensor_regex)
        self.num_steps = as_int(self.name, "num_steps", num_steps, minimum=2)
        self.rtol = as_float(self.name, "rtol", rtol)
        self.atol = as_float(self.name, "atol", atol)
        self.equal_nan = as_bool(self.name, "equal_nan", equal_nan)
        self._oldest: dict[str, int] = {}  # tensor -> the oldest of its saved steps it needs

    def keep_from(self, next_step: int) -> int:
        present = self.present()
        self._oldest = {t: s for t, s in self._oldest.items() if t in present}
        return min(self._oldest.values(), default=next_step)

    def invoke_at_step(self, step: int) -> bool:
        for tensor in self.chosen():
            current = self.value(tensor, step)
            if current is None:
                continue
            earlier = [s for s in self.base_trial.tensor(tensor).steps() if s < step]
            earlier = earlier[-(self.num_steps - 1) :]
            self._oldest[tensor] = [*earlier, step][-(self.num_steps - 1) :][0]
            if len(earlier) < self.num_steps - 1:
                continue
            if all(self._same(current, self.value(tensor, s)) for s in earlier):
                return self.found(
                    f"{tensor} is unchanged over steps {earlier[0]}..{step} "
                    f"({self.num_steps} saved steps)",
                    tensor=tensor,
                    steps=[*earlier, step],
                )
        return False

    def _same(self, current: Any, other: Any) -> bool:
        if other is None or other.shape != current.shape:
            return False
        return bool(
            np.allclose(current, other, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan)
        )


class TensorVariance(_SelectingRule):
    """Fires when a tensor's variance is above ``max_threshold`` or below ``min_threshold``."""

    name = "TensorVariance"

    def __init__(
        self,
        base_trial: Any,
        collection_names: Any = None,
        tensor_regex: Any = None,
        max_threshold: Any = None,
        min_threshold: Any = None,
    ) -> None:
        super().__init__(base_trial)
        self._select(collection_names, tensor_regex)
        self.max_threshold = as_optional_float(self.name, "max_threshold", max_threshold)
        self.min_threshold = as_optional_float(self.name, "min_threshold", min_threshold)

    def invoke_at_step(self, step: int) -> bool:
        if self.max_threshold is None and self.min_threshold is None:
            return False
        for tensor in self.chosen():
            variance = self.reduction(tensor, step, "variance")
            if variance is None or variance != variance:
                continue
            if self.max_threshold is not None and variance > self.max_threshold:
                bound = f"above max_threshold {self.max_threshold:g}"
            elif self.min_threshold is not None and variance < self.min_threshold:
                bound = f"below min_threshold {self.min_threshold:g}"
            else:
                continue
            return self.found(
                f"variance of {tensor} is {variance:.4g} at step {step}, {bound}",
                tensor=tensor,
                step=step,
                variance=variance,
            )
        return False


class SimilarAcrossRuns(_SelectingRule):
    """Fires when a tensor differs (not ``numpy.allclose``) from the same tensor at the same
    step of another run (``other_trials``: the first one is compared)."""

    name = "SimilarAcrossRuns"

    def __init__(
        self,
        base_trial: Any,
        other_trials: Any = None,
        collection_names: Any = None,
        tensor_regex: Any = None,
    ) -> None:
        others = other_trials if isinstance(other_trials, list | tuple) else [other_trials]
        others = [o for o in others if o is not None and not isinstance(o, str)]
        if not others:
            raise ValueError(f"{self.name} needs other_trials: the run to compare with")
        super().__init__(base_trial, others)
        self._select(collection_names, tensor_regex)

    def invoke_at_step(self, step: int) -> bool:
        other = self.other_trials[0]
        for tensor in self.chosen():
            mine = self.value(tensor, step)
            theirs = self.value(tensor, step, trial=other)
            if mine is None or theirs is None:
                continue
            if mine.shape != theirs.shape or not np.allclose(mine, theirs, equal_nan=True):
                return self.found(
                    f"{tensor} differs from the other run's at step {step}",
                    tensor=tensor,
                    step=step,
                )
        return False
