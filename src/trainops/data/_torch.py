"""What the datasets ask of PyTorch, each answer found without torch when it is not installed.

The datasets subclass ``torch.utils.data.IterableDataset`` when torch can be imported (so a
``DataLoader`` treats them as iterable datasets) and plain ``object`` otherwise; this module is
only imported with the dataset classes, never by ``import trainops.data``. The DataLoader worker
and the ``torch.distributed`` rank are read only if torch is already loaded in the process: a
script that never imported torch has neither.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

__all__ = ["distributed_rank", "iterable_base", "worker_slot"]


def iterable_base() -> type[Any]:
    """``torch.utils.data.IterableDataset`` when torch is installed, else ``object``."""
    if importlib.util.find_spec("torch") is None:
        return object
    from torch.utils.data import IterableDataset

    return IterableDataset


def worker_slot() -> tuple[int, int]:
    """``(worker id, number of workers)`` of the DataLoader worker running this, or ``(0, 1)``."""
    if "torch.utils.data" not in sys.modules:
        return 0, 1
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    return (0, 1) if info is None else (int(info.id), int(info.num_workers))


def distributed_rank() -> tuple[int, int] | None:
    """``(rank, world size)`` of an initialised ``torch.distributed`` group, else None."""
    if "torch.distributed" not in sys.modules:
        return None
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    return int(dist.get_rank()), int(dist.get_world_size())
