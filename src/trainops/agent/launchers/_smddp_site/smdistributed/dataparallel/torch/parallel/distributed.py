"""``smdistributed.dataparallel.torch.parallel.distributed.DistributedDataParallel``:
PyTorch's own ``DistributedDataParallel`` over the world ``init_process_group()`` formed (the
library's other process groups did not exist, so ``process_group`` must be ``group.WORLD``)."""

from __future__ import annotations

import inspect
from typing import Any

import torch.distributed as _dist
from torch.nn.parallel import DistributedDataParallel as _TorchDDP

__all__ = ["DistributedDataParallel"]

# The library's ``broadcast_buffers=False``: newer torch names it ``forward_sync_buffers`` and
# warns that ``broadcast_buffers`` is deprecated (a warning the script did not ask for).
_NO_BUFFER_SYNC = (
    "forward_sync_buffers"
    if "forward_sync_buffers" in inspect.signature(_TorchDDP.__init__).parameters
    else "broadcast_buffers"
)


class DistributedDataParallel(_TorchDDP):
    """PyTorch's ``DistributedDataParallel`` with the library's signature."""

    def __init__(
        self,
        module: Any,
        device_ids: Any = None,
        output_device: Any = None,
        broadcast_buffers: bool = True,
        process_group: Any = None,
        bucket_cap_mb: Any = None,
        **kwargs: Any,
    ) -> None:
        if process_group is not None and process_group is not _dist.group.WORLD:
            raise ValueError(
                "smdistributed.dataparallel DistributedDataParallel: only group.WORLD is "
                "supported as process_group"
            )
        # Only what the script set: torch warns about some of these arguments when given.
        given = {"bucket_cap_mb": bucket_cap_mb, "output_device": output_device}
        kwargs.update({k: v for k, v in given.items() if v is not None})
        if not broadcast_buffers:
            kwargs[_NO_BUFFER_SYNC] = False
        super().__init__(module, device_ids=device_ids, **kwargs)
