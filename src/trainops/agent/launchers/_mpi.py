"""The MPI launcher: ``mpirun`` as SageMaker's MPI runner starts it (Open MPI).

``mpirun --host algo-1:P -np P --allow-run-as-root --display-map --tag-output`` with the
toolkit's MCA options (TCP on the host's interface, no tree spawn, ``-bind-to none -map-by
slot``, ``ob1``, no openib, abort on a non-zero rank, no vader single-copy), ``-x`` for every
``SM_*`` variable, ``PATH``, ``LD_LIBRARY_PATH`` and ``PYTHONPATH``, the spec's
``custom_mpi_options`` (split like a command line, never run by a shell), and the script as
``python -m mpi4py <script> <args>``. Every rank gets ``--tag-output`` tags, which the supervisor
turns into rank tags.

One host for now: spanning hosts needs a remote launch of Open MPI's daemons through the other
hosts' agents (there is no sshd between local hosts); the control plane refuses ``mpi`` jobs of
more than one host until then, naming the field.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil

from trainops.agent.launchers._base import LaunchContext, LaunchError, RankProcess

__all__ = ["MpiLauncher", "mpirun_command"]

MCA = (
    ("btl_tcp_if_include", "lo"),
    ("oob_tcp_if_include", "lo"),
    ("plm_rsh_no_tree_spawn", "1"),
    ("pml", "ob1"),
    ("btl", "^openib"),
    ("orte_abort_on_non_zero_status", "1"),
    ("btl_vader_single_copy_mechanism", "none"),
)
EXPORTED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "MASTER_ADDR", "MASTER_PORT")
NCCL = ("NCCL_MIN_NRINGS=4", "NCCL_SOCKET_IFNAME=lo", "NCCL_DEBUG=INFO")


def mpirun_command(ctx: LaunchContext, mpirun: str) -> list[str]:
    per_host = ctx.processes_per_host
    hosts = ",".join(f"{host}:{per_host}" for host in ctx.hosts)
    argv = [mpirun, "--host", hosts, "-np", str(per_host * len(ctx.hosts))]
    argv += ["--allow-run-as-root", "--display-map", "--tag-output"]
    for name, value in MCA:
        argv += ["-mca", name, value]
    argv += ["-bind-to", "none", "-map-by", "slot"]
    for pair in NCCL:
        argv += ["-x", pair]
    names = [n for n in ctx.env if n.startswith("SM_") or n in EXPORTED]
    for name in sorted(names):
        argv += ["-x", name]
    argv += shlex.split(ctx.job.distribution.mpi.custom_mpi_options)
    if ctx.entry_point.endswith(".py") and ctx.command[:2] == (ctx.python, ctx.entry_point):
        argv += [ctx.python, "-m", "mpi4py", ctx.entry_point, *ctx.script_args]
    else:
        argv += list(ctx.command)
    return argv


class MpiLauncher:
    name = "mpi"
    max_hosts: int | None = 1

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        mpirun = shutil.which("mpirun", path=ctx.env.get("PATH"))
        if mpirun is None:
            raise LaunchError(
                "distribution.mpi needs mpirun (Open MPI) on this machine; on Debian: "
                "apt-get install openmpi-bin"
            )
        if len(ctx.hosts) > (self.max_hosts or len(ctx.hosts)):
            raise LaunchError("mpirun across more than one host is not available yet")
        # Each rank learns its rank from Open MPI (OMPI_COMM_WORLD_*); the master is the same
        # for all of them and travels with -x.
        env = {**ctx.env, "MASTER_ADDR": ctx.master_addr, "MASTER_PORT": str(ctx.master_port)}
        argv = mpirun_command(dataclasses.replace(ctx, env=env), mpirun)
        return [RankProcess(tuple(argv), env, output_tags="mpirun")]
