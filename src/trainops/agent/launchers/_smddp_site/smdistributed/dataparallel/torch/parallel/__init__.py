"""The data parallel library's older ``DistributedDataParallel`` (deprecated in its 1.4.0)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
