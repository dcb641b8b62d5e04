"""Model parallelism from the job's ``smdistributed.modelparallel`` parameters.

:class:`ParallelLayout` reads the degrees SageMaker's SDK passes (``SM_HP_MP_PARAMETERS``:
``pipeline_parallel_degree`` or ``partitions``, ``microbatches``, ``pipeline``,
``sharded_data_parallel_degree``). Ranks are laid out pipeline-major: pipeline ``g`` is ranks
``g*P .. g*P+P-1`` and rank ``r`` holds stage ``r % P``; the ranks holding the same stage are
data-parallel replicas.

- :class:`Pipeline` splits a model into balanced stages (``split_model``) and runs this rank's
  stage with ``torch.distributed.pipelining``: ``pipeline: simple`` is GPipe (all forwards,
  then all backwards), ``interleaved`` is 1F1B. Replicas of a stage average their gradients
  after each step.
- :func:`shard_model` applies FSDP2 (``fully_shard``) to every child module and the root:
  parameters, gradients and optimizer state sharded over ``sharded_data_parallel_degree`` ranks
  (and replicated across the rest, hybrid sharding, when that degree is smaller than the world).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainops.distributed._split import split_model
from trainops.distributed._world import DistributedError, World

__all__ = ["ParallelLayout", "Pipeline", "shard_model"]

SCHEDULES = ("simple", "interleaved")


@dataclass(frozen=True, slots=True)
class ParallelLayout:
    """The degrees of a job's model parallelism and this rank's place in them."""

    world: World
    pipeline: int = 1
    microbatches: int = 1
    schedule: str = "interleaved"
    sharded: int = 1

    def __post_init__(self) -> None:
        size = self.world.world_size
        if size % self.pipeline:
            raise DistributedError(
                f"pipeline_parallel_degree {self.pipeline} does not divide the world size {size}"
            )
        if self.data % self.sharded:
            raise DistributedError(
                f"sharded_data_parallel_degree {self.sharded} does not divide the data-parallel "
                f"degree {self.data}"
            )
        if self.schedule not in SCHEDULES:
            raise DistributedError(f"pipeline {self.schedule!r}: use 'simple' or 'interleaved'")

    @classmethod
    def from_env(
        cls, world: World | None = None, environ: Mapping[str, str] | None = None
    ) -> ParallelLayout:
        env = os.environ if environ is None else environ
        raw = env.get("SM_HP_MP_PARAMETERS") or "{}"
        try:
            params = json.loads(raw)
        except json.JSONDecodeError:
            raise DistributedError(f"SM_HP_MP_PARAMETERS={raw!r} is not JSON") from None
        if not isinstance(params, dict):
            raise DistributedError("SM_HP_MP_PARAMETERS is not a JSON object")
        return cls(
            world or World.from_env(env),
            pipeline=int(params.get("pipeline_parallel_degree") or params.get("partitions") or 1),
            microbatches=int(params.get("microbatches", 1)),
            schedule=str(params.get("pipeline", "interleaved")),
            sharded=int(params.get("sharded_data_parallel_degree", 1)),
        )

    @property
    def data(self) -> int:
        """How many replicas of each pipeline stage there are."""
        return self.world.world_size // self.pipeline

    @property
    def stage(self) -> int:
        return self.world.rank % self.pipeline

    def pipeline_ranks(self, group: int) -> list[int]:
        return list(range(group * self.pipeline, (group + 1) * self.pipeline))

    def replica_ranks(self, stage: int) -> list[int]:
        return [g * self.pipeline + stage for g in range(self.data)]


class Pipeline:
    """This rank's stage of a pipelined model, and the schedule that drives it."""

    def __init__(
        self,
        model: Any,
        layout: ParallelLayout,
        loss_fn: Callable[[Any, Any], Any],
        *,
        by: str = "params",
        split_points: Sequence[str | int] | None = None,
        sample: Any = None,
        device: Any = None,
    ) -> None:
        import torch
        import torch.distributed as dist
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

        self.layout = layout
        stages = split_model(
            model, layout.pipeline, by=by, split_points=split_points, sample=sample
        )
        self.module = stages[layout.stage]
        # Every rank creates every group, in the same order (a collective rule of torch).
        pipelines = [dist.new_group(layout.pipeline_ranks(g)) for g in range(layout.data)]
        replicas = [dist.new_group(layout.replica_ranks(s)) for s in range(layout.pipeline)]
        self._replicas = replicas[layout.stage] if layout.data > 1 else None
        stage = PipelineStage(
            self.module,
            layout.stage,
            layout.pipeline,
            device or torch.device("cpu"),
            group=pipelines[layout.world.rank // layout.pipeline],
        )
        schedule = ScheduleGPipe if layout.schedule == "simple" else Schedule1F1B
        self.schedule = schedule(stage, n_microbatches=layout.microbatches, loss_fn=loss_fn)

    @property
    def is_first(self) -> bool:
        return self.layout.stage == 0

    @property
    def is_last(self) -> bool:
        return self.layout.stage == self.layout.pipeline - 1

    def step(self, inputs: Any = None, target: Any = None) -> Any:
        """One forward and backward of a batch; the last stage returns the mean loss.

        The first stage gives ``inputs``, the last ``target``; the others give nothing.
        """
        losses: list[Any] = []
        if self.is_first and self.is_last:
            self.schedule.step(inputs, target=target, losses=losses)
        elif self.is_first:
            self.schedule.step(inputs)
        elif self.is_last:
            self.schedule.step(target=target, losses=losses)
        else:
            self.schedule.step()
        self._average_replica_gradients()
        return sum(losses) / len(losses) if losses else None

    def _average_replica_gradients(self) -> None:
        if self._replicas is None:
            return
        import torch.distributed as dist

        for parameter in self.module.parameters():
            if parameter.grad is not None:
                dist.all_reduce(parameter.grad, group=self._replicas)
                parameter.grad.div_(self.layout.data)


def shard_model(model: Any, layout: ParallelLayout | None = None) -> Any:
    """FSDP2 over ``layout.sharded`` ranks (hybrid: replicated across the rest); in place."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    layout = layout or ParallelLayout.from_env()
    world = layout.world
    device = "cuda" if _on_gpu() else "cpu"
    if layout.sharded == world.world_size:
        mesh = init_device_mesh(device, (world.world_size,))
    else:
        replicas = world.world_size // layout.sharded
        mesh = init_device_mesh(
            device, (replicas, layout.sharded), mesh_dim_names=("replicate", "shard")
        )
    for child in model.children():
        if any(True for _ in child.parameters()):
            fully_shard(child, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _on_gpu() -> bool:
    import torch

    return bool(torch.cuda.is_available())
