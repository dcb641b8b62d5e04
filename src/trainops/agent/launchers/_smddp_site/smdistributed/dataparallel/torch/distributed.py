"""The data parallel library's older ``torch.distributed``-like API (deprecated in its 1.4.0).

Scripts written for it (``import smdistributed.dataparallel.torch.distributed as dist``,
``dist.init_process_group()``, ``dist.get_local_rank()``) run over ``torch.distributed`` with
the ``smddp`` backend. Process groups other than ``group.WORLD`` are refused, as the library
refuses them.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as _dist

from . import torch_smddp

__all__ = [
    "ReduceOp",
    "all_gather",
    "all_reduce",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "get_local_rank",
    "get_local_size",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "is_available",
    "is_initialized",
]

group = _dist.group


class ReduceOp:
    """The reductions the library offers (``AVERAGE``, ``SUM``, ``MIN``, ``MAX``)."""

    AVERAGE = "AVERAGE"
    SUM = _dist.ReduceOp.SUM
    MIN = _dist.ReduceOp.MIN
    MAX = _dist.ReduceOp.MAX


def _world(name: str, chosen: Any) -> None:
    if chosen is not None and chosen is not _dist.group.WORLD:
        raise ValueError(
            f"smdistributed.dataparallel.torch.distributed.{name}: only group.WORLD is "
            "supported (the library has no other process groups)"
        )


def is_available() -> bool:
    """Whether the script was started as a distributed job (its rank variables are set)."""
    return "WORLD_SIZE" in os.environ and _dist.is_available()


def init_process_group(*args: Any, **kwargs: Any) -> None:
    """Form the job's world over the ``smddp`` backend (arguments are ignored, as the library
    ignores them); a second call does nothing.

    This API has no way to end the world (the library ended it itself): over NCCL the
    ``smddp`` backend ends it when the script exits (``torch_smddp.create_backend``).
    """
    if not _dist.is_initialized():
        _dist.init_process_group(backend=torch_smddp.BACKEND)


def is_initialized() -> bool:
    return _dist.is_initialized()


def get_world_size(group: Any = None) -> int:
    _world("get_world_size", group)
    return _dist.get_world_size()


def get_rank(group: Any = None) -> int:
    _world("get_rank", group)
    return _dist.get_rank()


def get_local_rank() -> int:
    """This process's rank among its host's processes."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def get_local_size() -> int:
    """How many of the job's processes run on this host."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def all_reduce(
    tensor: torch.Tensor, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Any:
    """Reduce ``tensor`` in place over every process; ``ReduceOp.AVERAGE`` is the mean."""
    _world("all_reduce", group)
    if isinstance(op, str) and op == ReduceOp.AVERAGE:
        if torch_smddp.device_backend() == "nccl":
            return _dist.all_reduce(tensor, op=_dist.ReduceOp.AVG, async_op=async_op)
        _dist.all_reduce(tensor, op=_dist.ReduceOp.SUM)  # gloo has no AVG: sum, then divide
        tensor.div_(_dist.get_world_size())
        return _Done() if async_op else None
    return _dist.all_reduce(tensor, op=op, async_op=async_op)


class _Done:
    """The handle of a collective that has already completed."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def broadcast(tensor: torch.Tensor, src: int = 0, group: Any = None, async_op: bool = False) -> Any:
    _world("broadcast", group)
    return _dist.broadcast(tensor, src=src, async_op=async_op)


def all_gather(
    tensor_list: list[torch.Tensor], tensor: torch.Tensor, group: Any = None, async_op: bool = False
) -> Any:
    _world("all_gather", group)
    return _dist.all_gather(tensor_list, tensor, async_op=async_op)


def all_to_all_single(
    output_t: torch.Tensor,
    input_t: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    _world("all_to_all_single", group)
    return _dist.all_to_all_single(
        output_t, input_t, output_split_sizes, input_split_sizes, async_op=async_op
    )


def barrier(group: Any = None, async_op: bool = False) -> Any:
    _world("barrier", group)
    return _dist.barrier(async_op=async_op)
