"""One rank of the model-parallel tests: pipeline or FSDP2 training next to one-process training.

``argv``: mode (pipeline | shard), output file. Degrees come from SM_HP_MP_PARAMETERS and the
rank variables, as a job's processes get them. Every rank trains the same model on the same
batch for three SGD steps, and writes the largest parameter difference from a reference model
trained in one process on the whole batch.
"""

from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

from trainops.distributed import ParallelLayout, Pipeline, init_process_group, shard_model

STEPS, BATCH = 3, 16


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 4),
    )  # fmt: skip


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, 8, generator=generator), torch.randint(
        0, 4, (BATCH,), generator=generator
    )


def _reference(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return {k: v.detach() for k, v in model.state_dict().items()}


def _pipeline(layout: ParallelLayout, x: torch.Tensor, y: torch.Tensor) -> float:
    full = _model()
    reference = _reference(copy.deepcopy(full), x, y)
    pipe = Pipeline(full, layout, lambda out, target: nn.functional.cross_entropy(out, target))
    # Each pipeline replica takes its share of the batch; replicas average their gradients.
    share = BATCH // layout.data
    replica = layout.world.rank // layout.pipeline
    mine = slice(replica * share, (replica + 1) * share)
    optimizer = torch.optim.SGD(pipe.module.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimizer.zero_grad()
        pipe.step(x[mine] if pipe.is_first else None, y[mine] if pipe.is_last else None)
        optimizer.step()
    # The stage's modules are the full model's children, so their state keys are the model's.
    names = {id(m): name for name, m in full.named_children()}
    diffs = [
        float((p - reference[f"{names[id(module)]}.{pname}"]).abs().max())
        for module in pipe.module.children()
        for pname, p in module.named_parameters()
    ]
    return max(diffs) if diffs else 0.0


def _shard(layout: ParallelLayout, x: torch.Tensor, y: torch.Tensor) -> float:
    model = _model()
    reference = _reference(copy.deepcopy(model), x, y)
    shard_model(model, layout)
    share = BATCH // layout.world.world_size
    mine = slice(layout.world.rank * share, (layout.world.rank + 1) * share)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[mine]), y[mine]).backward()
        optimizer.step()
    state = {k: v.full_tensor() for k, v in model.state_dict().items()}
    return max(float((state[k] - v).abs().max()) for k, v in reference.items())


def main() -> None:
    mode, out = sys.argv[1], sys.argv[2]
    world = init_process_group("gloo", timeout_s=60)
    torch.set_num_threads(1)
    layout = ParallelLayout.from_env(world)
    x, y = _batch()
    diff = _pipeline(layout, x, y) if mode == "pipeline" else _shard(layout, x, y)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"rank": world.rank, "max_abs_diff": diff}, handle)
    dist.barrier()  # leave together: gloo aborts a rank whose peers are gone
    dist.destroy_process_group()
    # Skip the interpreter's teardown: torch's C++ objects left behind by FSDP and gloo are
    # destroyed there in no fixed order, and about one run in a few hundred aborts with
    # "terminate called without an active exception" after every result was written.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
