"""Worker names and counts as smdebug's PyTorch hook gives them.

Under ``torch.distributed`` (DDP, torchrun, the project's launcher) each rank is
``worker_<rank>`` and the world size is the number of workers; a single process is
``worker_0`` of one. With ``include_workers="one"`` only ``worker_0`` (the chief) writes and the
collections file says one worker; with ``"all"`` every rank writes its own files.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHIEF", "num_workers", "worker_name"]

CHIEF = "worker_0"


def _initialized(torch: Any) -> bool:
    dist = getattr(torch, "distributed", None)
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def worker_name(torch: Any) -> str:
    if _initialized(torch):
        return f"worker_{torch.distributed.get_rank()}"
    return CHIEF


def num_workers(torch: Any) -> int:
    if _initialized(torch):
        return int(torch.distributed.get_world_size())
    return 1
