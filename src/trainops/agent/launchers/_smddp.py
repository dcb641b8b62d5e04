"""SageMaker's SMDataParallel runner: the plain launcher's ranks, with the data parallel library.

SageMaker's toolkit starts ``smdistributed.dataparallel`` and ``pytorchddp`` jobs with its
SMDataParallel runner, in containers that have the library (``smdistributed.dataparallel``).
Here each host starts its ranks as the plain launcher does, and each rank also gets:

- the library's PyTorch client on its ``PYTHONPATH`` (``_smddp_site/``, last, so a real
  library installed in the job's Python wins): ``import
  smdistributed.dataparallel.torch.torch_smddp`` and ``init_process_group(backend="smddp")``
  run unchanged;
- the variable the toolkit sets for the library: ``SMDATAPARALLEL_USE_SINGLENODE=1`` on a job of
  one host, ``SMDATAPARALLEL_USE_HOMOGENEOUS=1`` on more.
"""

from __future__ import annotations

import dataclasses
import os

from trainops.agent.launchers._base import LaunchContext, RankProcess
from trainops.agent.launchers._plain import PlainLauncher
from trainops.agent.launchers._smddp_site import SMDDP_SITE

__all__ = ["SmDataParallelLauncher", "smddp_env"]


def smddp_env(ctx: LaunchContext) -> dict[str, str]:
    """What a rank of an SMDataParallel job gets on top of the plain launcher's environment."""
    paths = [p for p in ctx.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    site = str(SMDDP_SITE)
    flag = (
        "SMDATAPARALLEL_USE_SINGLENODE" if len(ctx.hosts) == 1 else "SMDATAPARALLEL_USE_HOMOGENEOUS"
    )
    return {"PYTHONPATH": os.pathsep.join([*(p for p in paths if p != site), site]), flag: "1"}


class SmDataParallelLauncher:
    name = "smdistributed.dataparallel"
    max_hosts: int | None = None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        extra = smddp_env(ctx)
        return [
            dataclasses.replace(process, env={**process.env, **extra})
            for process in PlainLauncher().processes(ctx)
        ]
