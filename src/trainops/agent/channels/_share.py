"""Which entries of a channel a host gets in one epoch: ShuffleConfig's order, ShardedByKey's split.

An entry is whatever the channel deals out whole: an object of a prefix, an entry of a manifest,
a line of an augmented manifest. The rule, the same on every host so that no host has to ask
another:

1. Start from the channel's own order (object keys sorted; a manifest's order as written).
2. With a seed, permute it with ``random.Random(seed)`` in epoch 0 (File mode's one and only
   epoch) and with ``random.Random(f"{seed}/{epoch}")`` in a later epoch (a string seed is hashed
   with SHA-512, so it is the same in every process and on every machine).
3. With ShardedByKey, host ``i`` of ``n`` (its position in the sorted host list) takes every
   ``n``-th entry of that order starting at ``i``.

So the shares of one epoch are disjoint, cover every entry and differ in size by at most one;
with a seed both the order and the split change from epoch to epoch (an entry may move to
another host), and without one every epoch repeats epoch 0.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["SHARDED_NAMES", "epoch_order", "share_of"]

T = TypeVar("T")
SHARDED_NAMES = frozenset({"ShardedByKey", "ShardedByS3Key"})


def epoch_order(entries: Sequence[T], seed: int | None, epoch: int) -> list[T]:
    """``entries`` in the order of ``epoch``: as given without a seed, else permuted."""
    if epoch < 0:
        raise ValueError(f"epoch must be 0 or more, got {epoch}")
    ordered = list(entries)
    if seed is not None:
        random.Random(seed if epoch == 0 else f"{seed}/{epoch}").shuffle(ordered)
    return ordered


def share_of(
    entries: Sequence[T],
    hosts: Sequence[str],
    current_host: str,
    distribution: str,
    *,
    seed: int | None = None,
    epoch: int = 0,
) -> list[T]:
    """The entries ``current_host`` gets in ``epoch``, in the order it gets them."""
    ordered = epoch_order(entries, seed, epoch)
    if distribution not in SHARDED_NAMES:
        return ordered
    ranked = sorted(hosts)
    return ordered[ranked.index(current_host) :: len(ranked)]
