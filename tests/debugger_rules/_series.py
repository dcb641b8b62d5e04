"""Writing tensor series for rule tests: real files in smdebug's layout (TensorFileWriter)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainops.debugger import Collection, CollectionManager, ModeKeys
from trainops.debugger.format import TensorFileWriter, mark_training_end

__all__ = ["COLLECTIONS", "Series", "write_series"]

#: The collections the hook would write, by the names smdebug gives its tensors.
COLLECTIONS = {
    "gradients": ["^gradient/.*"],
    "weights": [".*weight$"],
    "losses": [".*loss.*"],
    "labels": [".*labels$"],
    "predictions": [".*predictions$"],
}


@dataclass
class Series:
    """Steps of tensors: ``steps[global step] = {name: array}``; ``modes[global step] =
    (mode, mode step)`` (TRAIN and the global step by default)."""

    steps: dict[int, dict[str, Any]] = field(default_factory=dict)
    modes: dict[int, tuple[ModeKeys, int]] = field(default_factory=dict)

    def add(
        self,
        step: int,
        mode: ModeKeys = ModeKeys.TRAIN,
        mode_step: int | None = None,
        **tensors: Any,
    ) -> Series:
        self.steps.setdefault(step, {}).update(
            {k.replace("__", "/"): v for k, v in tensors.items()}
        )
        self.modes[step] = (mode, step if mode_step is None else mode_step)
        return self


def write_series(
    path: Path,
    series: Series,
    *,
    collections: Mapping[str, Sequence[str]] = COLLECTIONS,
    end: bool = True,
    worker: str = "worker_0",
) -> Path:
    """Write ``series`` under ``path`` (collections first, then each step, then the end mark)."""
    writer = TensorFileWriter(path, worker, sync=False)
    manager = CollectionManager(
        [Collection(name, list(regexes)) for name, regexes in collections.items()]
    )
    writer.write_collections(manager, 1)
    for step in sorted(series.steps):
        mode, mode_step = series.modes.get(step, (ModeKeys.TRAIN, step))
        tensors = [(name, np.asarray(value)) for name, value in sorted(series.steps[step].items())]
        writer.write_step(step, mode, mode_step, tensors)
    if end:
        mark_training_end(path)
    return path
