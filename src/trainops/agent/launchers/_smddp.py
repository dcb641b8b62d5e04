"""SageMaker's SMDataParallel runner: the plain launcher's ranks, with the data parallel library.

SageMaker's toolkit starts ``smdistributed.dataparallel`` and ``pytorchddp`` jobs with its
SMDataParallel runner, in containers that have the library (``smdistributed.dataparallel``).
Here each host starts its ranks as the plain launcher does, and each rank also gets:

- the library's PyTorch client on its ``PYTHONPATH`` (``_smddp_site/``, last, so a real
  library installed in the job's Python wins): ``import
  smdistributed.dataparallel.torch.torch_smddp`` and ``init_process_group(backend="smddp")``
  run unchanged;
- the variable the toolkit sets for the library: ``SMDATAPARALLEL_USE_SINGLENODE=1`` on a job of
  one host, ``SMDATAPARALLEL_USE_HOMOGENEOUS=1`` on more;
- what ``smdistributed.dataparallel.custom_mpi_options`` exports with ``-x NAME=VALUE`` (SageMaker
  passes those options to the ``mpirun`` that starts the ranks; the examples use ``-x
  NCCL_DEBUG=VERSION``). No ``mpirun`` starts them here, so its other options have no effect; an
  export never replaces a rank's rendezvous variables, nor a ``TRAINOPS_`` one.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import shlex

from trainops.agent.launchers._base import LaunchContext, RankProcess
from trainops.agent.launchers._plain import PlainLauncher
from trainops.agent.launchers._smddp_site import SMDDP_SITE

__all__ = ["SmDataParallelLauncher", "mpi_exports", "smddp_env"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by the launcher for each rank: an export must not change who the rank is.
_OWN = frozenset(
    {
        "MASTER_ADDR",
        "MASTER_PORT",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "NODE_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_RANK",
        "ROLE_WORLD_SIZE",
        "SMDATAPARALLEL_USE_SINGLENODE",
        "SMDATAPARALLEL_USE_HOMOGENEOUS",
    }
)


def mpi_exports(options: str) -> dict[str, str]:
    """The ``-x NAME=VALUE`` assignments of ``mpirun`` options (``-x NAME`` alone exports what
    the rank has anyway); names that are not variable names, the launcher's own and ``TRAINOPS_``
    ones are left out."""
    words, found = shlex.split(options), {}
    for flag, value in itertools.pairwise(words):
        name, equals, text = value.partition("=")
        if flag != "-x" or not equals or not _NAME.fullmatch(name):
            continue
        if name not in _OWN and not name.startswith("TRAINOPS_"):
            found[name] = text
    return found


def smddp_env(ctx: LaunchContext) -> dict[str, str]:
    """What a rank of an SMDataParallel job gets on top of the plain launcher's environment."""
    exports = mpi_exports(ctx.job.distribution.smdistributed.dataparallel.custom_mpi_options)
    pythonpath = exports.pop("PYTHONPATH", ctx.env.get("PYTHONPATH", ""))
    paths = [p for p in pythonpath.split(os.pathsep) if p]
    site = str(SMDDP_SITE)
    flag = (
        "SMDATAPARALLEL_USE_SINGLENODE" if len(ctx.hosts) == 1 else "SMDATAPARALLEL_USE_HOMOGENEOUS"
    )
    path = os.pathsep.join([*(p for p in paths if p != site), site])
    return {**exports, "PYTHONPATH": path, flag: "1"}


class SmDataParallelLauncher:
    name = "smdistributed.dataparallel"
    max_hosts: int | None = None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        extra = smddp_env(ctx)
        return [
            dataclasses.replace(process, env={**process.env, **extra})
            for process in PlainLauncher().processes(ctx)
        ]
