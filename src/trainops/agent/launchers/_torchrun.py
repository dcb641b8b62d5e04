"""The torchrun launcher: one ``torchrun`` per host, started as SageMaker's toolkit starts it.

``torchrun --nnodes H --nproc_per_node P --master_addr <master> --master_port <port>
--node_rank <i> <script> <args>``, run as ``python -m torch.distributed.run`` with the job's own
interpreter (the one that has the job's torch). torchrun starts the ranks and gives each its
``RANK``/``LOCAL_RANK``/``WORLD_SIZE``; it is told to prefix every line with its rank
(``--tee 3``), which the supervisor turns into the rank tag.
"""

from __future__ import annotations

from trainops.agent.launchers._base import LaunchContext, RankProcess

__all__ = ["TorchrunLauncher"]


class TorchrunLauncher:
    name = "torch_distributed"

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
        base = ctx.host_index * ctx.processes_per_host
        return [RankProcess(argv, env, local_rank_prefixes=True, rank_base=base)]
