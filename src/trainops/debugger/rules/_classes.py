"""Rules on labels and predictions: ClassImbalance and Confusion.

Labels and predictions are integer class ids (predictions may be scores over classes, reduced
with ``argmax`` where the rule takes it). Class ids are bounded (:data:`MAX_CLASSES`): a
hostile tensor cannot make a rule allocate a huge matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainops.debugger.rules._base import BuiltinRule, checked_regexes
from trainops.debugger.rules._params import as_bool, as_float, as_int, as_names

__all__ = ["MAX_CLASSES", "ClassImbalance", "Confusion"]

#: The most classes a rule counts (a larger id is an error in the data, reported as such).
MAX_CLASSES = 10_000
_MAX_SAMPLES = 10_000_000


def _classes(value: Any, argmax: bool, what: str) -> Any:
    array = np.asarray(value)
    if argmax and array.ndim > 1:
        array = np.argmax(array, axis=-1)
    ids = array.reshape(-1)
    if not np.issubdtype(ids.dtype, np.number) or not np.all(np.isfinite(ids)):
        raise ValueError(f"{what} are not finite class ids")
    ids = ids.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= MAX_CLASSES):
        raise ValueError(f"{what} hold a class id outside 0..{MAX_CLASSES - 1}")
    return ids


class ClassImbalance(BuiltinRule):
    """Counts labels (and predictions) over the steps; once ``samples`` labels are counted,
    fires when the most frequent class outnumbers the least frequent by more than
    ``threshold_imbalance`` times, or when a class is mispredicted in more than
    ``threshold_misprediction`` of its samples."""

    name = "ClassImbalance"

    def __init__(
        self,
        base_trial: Any,
        threshold_imbalance: Any = 10,
        threshold_misprediction: Any = 0.7,
        samples: Any = 500,
        argmax: Any = False,
        labels_regex: Any = ".*labels",
        predictions_regex: Any = ".*predictions",
    ) -> None:
        super().__init__(base_trial)
        self.threshold_imbalance = as_float(self.name, "threshold_imbalance", threshold_imbalance)
        self.threshold_misprediction = as_float(
            self.name, "threshold_misprediction", threshold_misprediction
        )
        self.samples = as_int(self.name, "samples", samples, minimum=1)
        self.argmax = as_bool(self.name, "argmax", argmax)
        self.labels_regex = checked_regexes(
            self.name, "labels_regex", as_names(self.name, "labels_regex", labels_regex)
        )
        self.predictions_regex = checked_regexes(
            self.name,
            "predictions_regex",
            as_names(self.name, "predictions_regex", predictions_regex),
        )
        self.counts = np.zeros(0, dtype=np.int64)
        self.wrong = np.zeros(0, dtype=np.int64)
        self.seen = 0

    def invoke_at_step(self, step: int) -> bool:
        labels = self._first(self.labels_regex, step)
        if labels is None or self.seen >= _MAX_SAMPLES:
            return False
        ids = _classes(labels, False, "labels")
        predictions = self._first(self.predictions_regex, step)
        self._count(
            ids, None if predictions is None else _classes(predictions, self.argmax, "predictions")
        )
        if self.seen < self.samples:
            return False
        return self._imbalance(step) or self._misprediction(step)

    def _first(self, regexes: list[str], step: int) -> Any:
        for tensor in self.tensors(tensor_regex=regexes):
            value = self.value(tensor, step)
            if value is not None:
                return value
        return None

    def _count(self, labels: Any, predictions: Any) -> None:
        size = max(self.counts.size, int(labels.max()) + 1 if labels.size else 0)
        self.counts = np.pad(self.counts, (0, size - self.counts.size))
        self.wrong = np.pad(self.wrong, (0, size - self.wrong.size))
        self.counts += np.bincount(labels, minlength=size)
        if predictions is not None and predictions.shape == labels.shape:
            self.wrong += np.bincount(labels[predictions != labels], minlength=size)
        self.seen += int(labels.size)

    def _imbalance(self, step: int) -> bool:
        present = self.counts[self.counts > 0]
        if present.size < 2:
            return False
        ratio = float(present.max()) / float(present.min())
        if ratio <= self.threshold_imbalance:
            return False
        return self.found(
            f"classes are imbalanced {ratio:.3g}:1 over {self.seen} samples at step {step} "
            f"(threshold_imbalance {self.threshold_imbalance:g})",
            step=step,
            ratio=ratio,
            counts=self.counts.tolist()[:100],
        )

    def _misprediction(self, step: int) -> bool:
        for cls in np.flatnonzero(self.counts):
            share = float(self.wrong[cls]) / float(self.counts[cls])
            if share > self.threshold_misprediction:
                return self.found(
                    f"class {int(cls)} is mispredicted in {share:.3g} of its samples at step "
                    f"{step} (threshold_misprediction {self.threshold_misprediction:g})",
                    step=step,
                    cls=int(cls),
                    share=share,
                )
        return False


class Confusion(BuiltinRule):
    """The confusion matrix of labels and predictions at a step: fires when a class's share of
    correct predictions is below ``min_diag`` or its share predicted as one other class is above
    ``max_off_diag``. Labels are the tensor ``labels`` (or the first of ``labels_collection``),
    predictions ``predictions`` (or the first of ``predictions_collection``)."""

    name = "Confusion"

    def __init__(
        self,
        base_trial: Any,
        category_no: Any = None,
        labels: Any = "labels",
        predictions: Any = "predictions",
        labels_collection: Any = "labels",
        predictions_collection: Any = "predictions",
        min_diag: Any = 0.9,
        max_off_diag: Any = 0.1,
    ) -> None:
        super().__init__(base_trial)
        none = category_no is None or str(category_no).strip() in ("", "None")
        self.category_no = (
            None if none else as_int(self.name, "category_no", category_no, minimum=1)
        )
        if self.category_no is not None and self.category_no > MAX_CLASSES:
            raise ValueError(f"{self.name}.category_no must be at most {MAX_CLASSES}")
        self.labels, self.predictions = str(labels), str(predictions)
        self.labels_collection, self.predictions_collection = (
            str(labels_collection),
            str(predictions_collection),
        )
        self.min_diag = as_float(self.name, "min_diag", min_diag)
        self.max_off_diag = as_float(self.name, "max_off_diag", max_off_diag)

    def invoke_at_step(self, step: int) -> bool:
        labels = self._tensor(self.labels_collection, self.labels, step)
        predictions = self._tensor(self.predictions_collection, self.predictions, step)
        if labels is None or predictions is None:
            return False
        y = _classes(labels, False, "labels")
        y_hat = _classes(predictions, True, "predictions")
        if y.shape != y_hat.shape or not y.size:
            return False
        size = self.category_no or int(max(y.max(), y_hat.max())) + 1
        if y.max() >= size or y_hat.max() >= size:
            raise ValueError(f"a class id is {size} or more (category_no {size})")
        matrix = np.zeros((size, size), dtype=np.int64)
        np.add.at(matrix, (y, y_hat), 1)
        return self._judge(matrix, step)

    def _tensor(self, collection: str, name: str, step: int) -> Any:
        for tensor in self.tensors([collection]) or [name]:
            value = self.value(tensor, step)
            if value is not None:
                return value
        return None

    def _judge(self, matrix: Any, step: int) -> bool:
        for row in np.flatnonzero(matrix.sum(axis=1)):
            total = float(matrix[row].sum())
            diagonal = float(matrix[row, row]) / total
            off = matrix[row].astype(np.float64) / total
            off[row] = 0.0
            worst = int(np.argmax(off))
            if diagonal < self.min_diag or off[worst] > self.max_off_diag:
                return self.found(
                    f"class {int(row)} at step {step}: {diagonal:.3g} predicted right "
                    f"(min_diag {self.min_diag:g}), {off[worst]:.3g} as class {worst} "
                    f"(max_off_diag {self.max_off_diag:g})",
                    step=step,
                    cls=int(row),
                    diagonal=diagonal,
                    off_diagonal=float(off[worst]),
                )
        return False
