"""The hierarchical DDP communication hook itself (imports torch: loaded only when registered).

DDP checks a hook's annotations against the real torch types, so this module is written without
postponed annotations.
"""

import torch
import torch.distributed as dist

from trainops.distributed._hierarchical import HierarchicalState

__all__ = ["hierarchical_all_reduce", "hierarchical_hook"]


def hierarchical_all_reduce(tensor: torch.Tensor, state: HierarchicalState) -> torch.Tensor:
    """Sum ``tensor`` over every rank, in place: host leader, leaders, back to the host."""
    world = state.world
    if world.local_world_size > 1:
        dist.reduce(tensor, dst=state.leader, group=state.intra)
    if state.is_leader and world.num_nodes > 1:
        dist.all_reduce(tensor, group=state.inter)
    if world.local_world_size > 1:
        dist.broadcast(tensor, src=state.leader, group=state.intra)
    return tensor


def hierarchical_hook(
    state: HierarchicalState,
    bucket: dist.GradBucket,  # type: ignore[name-defined]
) -> torch.futures.Future[torch.Tensor]:
    """Reduce onto the host's leader, allreduce among leaders, broadcast back, divide by p."""
    tensor = hierarchical_all_reduce(bucket.buffer(), state)
    tensor.div_(state.world.world_size)
    state.buckets_reduced += 1
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(tensor)
    return future
