"""Data-parallel habits: scale by world size, shard data by rank, rank-0-only work, throughput.

Linear scaling (Goyal et al., "Accurate, Large Minibatch SGD"): when the global batch grows
``k``-fold, grow the learning rate ``k``-fold too (usually with a warm-up); ``sqrt`` scaling is
the gentler rule often used with adaptive optimisers.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any, TextIO, TypeVar

from trainops.distributed._world import DistributedError, World

__all__ = [
    "ThroughputMeter",
    "global_batch_size",
    "per_process_batch_size",
    "rank_zero_only",
    "scale_learning_rate",
    "shard",
]

T = TypeVar("T")
THROUGHPUT_METRIC = "samples_per_sec"


def scale_learning_rate(lr: float, world: World | None = None, *, rule: str = "linear") -> float:
    """``lr`` for ``world_size`` processes, given the one-process value (``linear`` or ``sqrt``)."""
    size = (world or World.from_env()).world_size
    if rule == "linear":
        return lr * size
    if rule == "sqrt":
        return lr * math.sqrt(size)
    raise ValueError(f"rule {rule!r}: use 'linear' or 'sqrt'")


def global_batch_size(per_process: int, world: World | None = None) -> int:
    """The batch the whole job takes per step when each process takes ``per_process``."""
    return per_process * (world or World.from_env()).world_size


def per_process_batch_size(global_batch: int, world: World | None = None) -> int:
    """Each process's share of ``global_batch``; refused when it does not divide evenly."""
    size = (world or World.from_env()).world_size
    if global_batch % size:
        raise DistributedError(
            f"global batch {global_batch} does not divide among {size} processes"
        )
    return global_batch // size


def shard(data: Any, world: World | None = None) -> Any:
    """This rank's share of ``data``: every ``world_size``-th item starting at ``rank``.

    A sequence gives a list; a torch ``Dataset`` gives a ``Subset`` (no copy). Use
    ``torch.utils.data.DistributedSampler`` instead where each epoch must reshuffle.
    """
    world = world or World.from_env()
    indices = range(world.rank, len(data), world.world_size)
    if isinstance(data, Sequence) and not _is_torch_dataset(data):
        return [data[i] for i in indices]
    from torch.utils.data import Subset

    return Subset(data, list(indices))


def _is_torch_dataset(data: Any) -> bool:
    return any(c.__module__.startswith("torch.utils.data") for c in type(data).__mro__)


def rank_zero_only(fn: Callable[..., T]) -> Callable[..., T | None]:
    """Run ``fn`` on rank 0 only (checkpoints, evaluation, uploads); other ranks get None."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T | None:
        return fn(*args, **kwargs) if World.from_env().is_main else None

    return wrapper


class ThroughputMeter:
    """Counts samples and prints ``samples_per_sec=<v>`` lines for metric scraping.

    Give the job the metric definition ``{name: samples_per_sec, regex: 'samples_per_sec=([0-9.]+)'}``;
    each rank reports its own rate (its log lines are tagged with host and rank).
    """

    def __init__(
        self,
        every_s: float = 10.0,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_s = every_s
        self._stream = stream
        self._clock = clock
        self._start = self._last = clock()
        self._samples = self._since_last = 0

    def step(self, samples: int) -> float | None:
        """Add ``samples``; returns (and prints) the rate when a report is due."""
        self._samples += samples
        self._since_last += samples
        now = self._clock()
        if now - self._last < self.every_s:
            return None
        rate = self._since_last / max(now - self._last, 1e-9)
        self._last, self._since_last = now, 0
        self._print(rate)
        return rate

    def overall(self) -> float:
        """Samples per second since the meter started."""
        return self._samples / max(self._clock() - self._start, 1e-9)

    def _print(self, rate: float) -> None:
        stream = self._stream or sys.stdout
        print(f"{THROUGHPUT_METRIC}={rate:.2f}", file=stream, flush=True)
