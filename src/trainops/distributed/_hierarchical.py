"""Topology-aware data parallel: reduce inside each host, allreduce across hosts, broadcast back.

Links inside a host are fast and links between hosts are slow. A flat ring allreduce makes every
one of its ``2(p-1)`` steps wait for a slow link; this hook (the idea of SageMaker's data
parallel library and the Herring paper) first reduces each gradient bucket onto the host's
leader over the fast links, allreduces among one leader per host over the slow ones (``2(N-1)``
steps on ``N`` hosts, moving ``2(1-1/N)`` of the bucket instead of ``2(1-1/p)``), then
broadcasts the sum back inside the host. The result equals default DDP's mean gradient within
float tolerance.

``enable_topology_aware(ddp_model)`` is the one call; ``data_parallel(model)`` wraps a model in
DDP and enables it when the job asked for ``smdistributed.dataparallel``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from trainops.distributed._world import DistributedError, World

__all__ = [
    "HierarchicalState",
    "data_parallel",
    "enable_topology_aware",
    "hierarchical_all_reduce",
    "hierarchical_allreduce_hook",
    "topology_aware_requested",
]

# The hyperparameter SageMaker's SDK sets for distribution={"smdistributed": {"dataparallel": ...}}
# and, mapped onto it, for {"pytorchddp": ...}; it reaches the script in SM_FRAMEWORK_PARAMS.
SMDDP_FLAG = "sagemaker_distributed_dataparallel_enabled"


@dataclass
class HierarchicalState:
    """The groups the hook reduces over; every rank must build it, in the same order."""

    world: World
    intra: Any  # this host's ranks
    inter: Any  # one leader per host (None on ranks that are not leaders)
    leader: int  # global rank of this host's leader
    buckets_reduced: int = 0  # gradient buckets the hook has reduced so far

    @property
    def is_leader(self) -> bool:
        return self.world.rank == self.leader

    @classmethod
    def build(cls, world: World | None = None) -> HierarchicalState:
        import torch.distributed as dist

        world = world or World.from_env()
        if world.rank // world.local_world_size != world.node_rank:
            raise DistributedError(
                f"rank {world.rank} is on host {world.node_rank}, but hierarchical reduction "
                "needs each host's ranks contiguous (rank // LOCAL_WORLD_SIZE == NODE_RANK)"
            )
        hosts = [world.host_ranks(n) for n in range(world.num_nodes)]
        intra, _ = dist.new_subgroups_by_enumeration(hosts)  # type: ignore[no-untyped-call]
        leaders = [ranks[0] for ranks in hosts]
        inter = dist.new_group(leaders)  # collective: every rank creates it
        leader = hosts[world.node_rank][0]
        return cls(world, intra, inter if world.rank == leader else None, leader)


def hierarchical_allreduce_hook(state: HierarchicalState, bucket: Any) -> Any:
    """A DDP communication hook: the mean of the bucket over all ranks, computed host-first.

    (The function DDP registers is ``_hook.hierarchical_hook``, whose annotations are the real
    torch types DDP checks; this name is the importable, torch-free entry for the docs.)
    """
    from trainops.distributed._hook import hierarchical_hook

    return hierarchical_hook(state, bucket)


def hierarchical_all_reduce(tensor: Any, state: HierarchicalState) -> Any:
    """Sum ``tensor`` over every rank in place, host first (the hook's collectives, for any
    tensor: benchmarks, custom training loops)."""
    from trainops.distributed._hook import hierarchical_all_reduce as reduce_

    return reduce_(tensor, state)


def enable_topology_aware(model: Any, world: World | None = None) -> HierarchicalState:
    """Register the hierarchical hook on a ``DistributedDataParallel`` model (all ranks)."""
    from trainops.distributed._hook import hierarchical_hook

    state = HierarchicalState.build(world)
    model.register_comm_hook(state, hierarchical_hook)
    return state


def topology_aware_requested(environ: dict[str, str] | None = None) -> bool:
    """Whether the job's distribution asked for topology-aware data parallel."""
    raw = (os.environ if environ is None else environ).get("SM_FRAMEWORK_PARAMS") or "{}"
    try:
        params = json.loads(raw)
    except json.JSONDecodeError:
        return False
    return isinstance(params, dict) and params.get(SMDDP_FLAG) in (True, "true", "True")


def data_parallel(
    model: Any, *, topology_aware: bool | None = None, world: World | None = None, **ddp: Any
) -> Any:
    """Wrap ``model`` in DDP; topology-aware when asked, or when the job's spec asked for it.

    In a world of one the model is returned as it is.
    """
    from torch.nn.parallel import DistributedDataParallel

    world = world or World.from_env()
    if not world.distributed:
        return model
    wrapped = DistributedDataParallel(model, **ddp)
    wanted = topology_aware_requested() if topology_aware is None else topology_aware
    if wanted and world.num_nodes > 1:
        enable_topology_aware(wrapped, world)
    return wrapped
