"""How one epoch's records are split between ranks and DataLoader workers.

An epoch is a sequence of ``total`` records (the shards in their epoch order, each shard's
records in order). With ``world`` ranks every rank gets the same number of records, as with
PyTorch's ``DistributedSampler``:

- by default ``ceil(total / world)`` each: rank ``r`` takes the contiguous run of positions
  ``[r * n, (r + 1) * n)``, and positions past the end wrap to the start of the epoch, so fewer
  than ``world`` records are seen twice in the epoch;
- with ``drop_last`` ``floor(total / world)`` each: the last ``total % world`` records of the
  epoch are left out (a different few every epoch when shards are shuffled).

A rank's own sequence is then cut into units of ``unit`` records (the batch size); worker ``w``
of ``W`` takes units ``w, w + W, w + 2W, ...``. That is the order in which a ``DataLoader``
collects results from its workers, so what the training loop sees is the rank's sequence in
order, whatever the number of workers: a position in it (records consumed) is all a resume
needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from trainops.data._torch import distributed_rank, worker_slot

__all__ = ["Placement", "PlacementError", "rank_length", "worker_units"]


class PlacementError(ValueError):
    """RANK / WORLD_SIZE (or the process group) do not describe a valid place."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where this process reads: rank ``rank`` of ``world``, DataLoader worker ``worker`` of
    ``workers``."""

    rank: int = 0
    world: int = 1
    worker: int = 0
    workers: int = 1

    @classmethod
    def detect(cls, env: Mapping[str, str] | None = None) -> Placement:
        """From ``torch.distributed`` when it is initialised, else ``RANK`` / ``WORLD_SIZE``
        (as torchrun sets them), else rank 0 of 1; the worker from the DataLoader."""
        rank, world = distributed_rank() or rank_from_env(os.environ if env is None else env)
        worker, workers = worker_slot()
        return cls(rank, world, worker, workers)


def rank_from_env(env: Mapping[str, str]) -> tuple[int, int]:
    """``(RANK, WORLD_SIZE)`` from the environment, checked; ``(0, 1)`` when both are unset."""
    if "RANK" not in env and "WORLD_SIZE" not in env:
        return 0, 1
    rank, world = _env_int(env, "RANK", 0), _env_int(env, "WORLD_SIZE", 1)
    if world < 1 or not 0 <= rank < world:
        raise PlacementError(f"RANK={rank} is not a rank of WORLD_SIZE={world}")
    return rank, world


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise PlacementError(f"{name}={raw!r} is not a whole number") from None


def rank_length(total: int, world: int, *, drop_last: bool) -> int:
    """How many records each of ``world`` ranks reads in an epoch of ``total``."""
    if total == 0:
        return 0
    return total // world if drop_last else -(-total // world)


def worker_units(start: int, length: int, unit: int, place: Placement) -> Iterator[range]:
    """This worker's units of the rank's positions ``[start, length)``, in order."""
    first = start + place.worker * unit
    for lo in range(first, length, unit * place.workers):
        yield range(lo, min(lo + unit, length))
