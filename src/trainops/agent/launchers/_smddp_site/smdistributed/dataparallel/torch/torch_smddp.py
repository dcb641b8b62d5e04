"""Importing this module registers the ``smddp`` backend of ``torch.distributed``.

``torch.distributed.init_process_group(backend="smddp")`` then forms the job's world from the
rendezvous variables trainops gives every rank, over PyTorch's NCCL where CUDA is available and
over gloo elsewhere. SageMaker's library reduces gradients with its own AllReduce and falls back
to NCCL for every other collective; here every collective is NCCL's (or gloo's).
"""

from __future__ import annotations

import atexit
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["BACKEND", "create_backend", "device_backend"]

BACKEND = "smddp"


def device_backend() -> str:
    """The PyTorch backend that carries ``smddp`` in this process: ``nccl`` or ``gloo``."""
    return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"


def create_backend(store: Any, rank: int, world_size: int, timeout: timedelta) -> Any:
    """The process group backend ``init_process_group(backend="smddp")`` asks for.

    Over NCCL, a world the script leaves without ``destroy_process_group()`` (the library's
    guide never calls it) is ended when the script exits, as the library ended its own: NCCL
    would otherwise warn into the script's log that it was never destroyed. (Gloo does not
    warn, and ending it at exit makes its own exit no safer.)
    """
    if device_backend() == "nccl":
        if not _ending:
            _ending.append(atexit.register(_destroy))
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, world_size, options)
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)


_ending: list[Any] = []


def _destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _register() -> None:
    if BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, create_backend, devices=["cpu", "cuda"])


_register()
