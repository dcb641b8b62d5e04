"""One rank of the hook-equivalence test: default DDP and the hierarchical hook, same batch.

Run as a plain process with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
MASTER_ADDR and MASTER_PORT set (2 hosts x 2 processes); writes the largest gradient difference
and both gradient checksums to the file named by argv[1].
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainops.distributed import enable_topology_aware, init_process_group, shard


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)
    )


def _grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def main() -> None:
    world = init_process_group("gloo", timeout_s=60)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(1)
    samples = [(torch.randn(32, generator=generator), i % 4) for i in range(64)]
    mine = shard(samples, world)
    x = torch.stack([s[0] for s in mine])
    y = torch.tensor([s[1] for s in mine])
    # bucket_cap_mb small enough that the hook runs on several buckets
    flat = DistributedDataParallel(_model(), bucket_cap_mb=0.01)
    hier = DistributedDataParallel(_model(), bucket_cap_mb=0.01)
    state = enable_topology_aware(hier, world)
    a, b = _grads(flat, x, y), _grads(hier, x, y)
    result = {
        "rank": world.rank,
        "buckets": state.buckets_reduced,
        "max_abs_diff": max(float((ga - gb).abs().max()) for ga, gb in zip(a, b, strict=True)),
        "flat_sum": float(sum(g.sum() for g in a)),
        "hier_sum": float(sum(g.sum() for g in b)),
    }
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(result, out)
    dist.barrier()  # leave together: gloo aborts a rank whose peers are gone
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
