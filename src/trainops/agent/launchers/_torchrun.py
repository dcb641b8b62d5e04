"""The torchrun launcher: one ``torchrun`` per host, started as SageMaker's toolkit starts it.

``torchrun --nnodes H --nproc_per_node P --master_addr <master> --master_port <port>
--node_rank <i> <script> <args>``, run as ``python -m torch.distributed.run`` with the job's own
interpreter (the one that has the job's torch). torchrun starts the ranks and gives each its
``RANK``/``LOCAL_RANK``/``WORLD_SIZE``; it is told to copy every line of its ranks to its own
output behind its header ``[default<local rank>]:`` (``--tee 3``; a prefix template the job's
environment may set is dropped, so the header is always that one), which the supervisor turns
into the rank's tag: ``rank_base + local rank``, the global rank.
"""

from __future__ import annotations

from trainops.agent.launchers._base import LaunchContext, RankProcess

__all__ = ["TorchrunLauncher"]

PREFIX_TEMPLATE = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"


class TorchrunLauncher:
    name = "torch_distributed"
    max_hosts: int | None = None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        argv = (
            ctx.python,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            str(len(ctx.hosts)),
            "--nproc_per_node",
            str(ctx.processes_per_host),
            "--master_addr",
            ctx.master_addr,
            "--master_port",
            str(ctx.master_port),
            "--node_rank",
            str(ctx.host_index),
            "--tee",
            "3",
            ctx.entry_point,
            *ctx.script_args,
        )
        env = {**ctx.env, "MASTER_ADDR": ctx.master_addr, "MASTER_PORT": str(ctx.master_port)}
        env.pop(PREFIX_TEMPLATE, None)
        per_host = ctx.processes_per_host
        base = ctx.host_index * per_host
        return [RankProcess(argv, env, output_tags="torchrun", rank_base=base, rank_count=per_host)]
