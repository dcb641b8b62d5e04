"""The plain launcher: ``processes_per_host`` copies of the script, each one rank.

With one process per host this is the SageMaker toolkit's ``Process`` runner: the script runs
as it is (and may spawn its own workers). With more, every copy gets the full rendezvous
environment, so an unmodified ``torch.distributed.init_process_group()`` forms the job's world.
``pytorchddp`` and ``smdistributed.dataparallel`` start their ranks the same way.
"""

from __future__ import annotations

from trainops.agent.launchers._base import LaunchContext, RankProcess, rendezvous_env

__all__ = ["PlainLauncher"]


class PlainLauncher:
    name = "plain"
    max_hosts: int | None = None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        per_host = ctx.processes_per_host
        return [
            RankProcess(
                ctx.command,
                {**ctx.env, **rendezvous_env(ctx, local)},
                # One process per host needs no rank tag: its host's name says whose it is.
                rank=ctx.host_index * per_host + local if per_host > 1 else None,
                local_rank=local if per_host > 1 else None,
            )
            for local in range(per_host)
        ]
