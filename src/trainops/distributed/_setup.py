"""Joining the process group and claiming this process's share of the host (torch imported lazily).

``init_process_group`` picks the backend the hardware wants (NCCL with GPUs, gloo without),
fills the rendezvous variables ``env://`` needs from :class:`World`, and is a no-op in a world
of one, so the same script runs by hand, as one process, or as one of many.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

from trainops.distributed._world import World

__all__ = ["barrier", "cpu_share", "init_process_group", "pin_process"]


def init_process_group(
    backend: str | None = None, *, timeout_s: float = 1800.0, world: World | None = None
) -> World:
    """Join the job's process group (once); returns this process's :class:`World`.

    ``backend`` defaults to ``nccl`` when this process has a GPU and ``gloo`` otherwise.
    """
    import torch
    import torch.distributed as dist

    world = world or World.from_env()
    if not world.distributed or dist.is_initialized():
        return world
    chosen = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    os.environ.setdefault("MASTER_ADDR", world.master_addr)
    os.environ.setdefault("MASTER_PORT", str(world.master_port))
    dist.init_process_group(
        backend=chosen,
        init_method="env://",
        rank=world.rank,
        world_size=world.world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return world


def cpu_share(world: World, cpus: list[int] | None = None) -> list[int]:
    """This process's slice of the CPUs it may run on, split evenly among the host's processes."""
    allowed = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    per = max(len(allowed) // world.local_world_size, 1)
    start = (world.local_rank * per) % len(allowed)
    return allowed[start : start + per]


def pin_process(world: World | None = None, *, set_threads: bool = True) -> Any:
    """Pin this process to its GPU (``local_rank`` modulo the GPUs seen) and its CPU share.

    Returns the ``torch.device`` to put the model on. CPU pinning keeps ranks on one host from
    fighting over cores; ``set_threads`` also sizes torch's intra-op pool to the share.
    """
    import torch

    world = world or World.from_env()
    share = cpu_share(world)
    if world.local_world_size > 1:
        os.sched_setaffinity(0, share)
    if set_threads:
        torch.set_num_threads(len(share))
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        index = world.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def barrier() -> None:
    """Wait for every rank (nothing to wait for in a world of one)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
