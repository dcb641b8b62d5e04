"""The MPI launcher: ``mpirun`` as SageMaker's MPI runner starts it (Open MPI).

``mpirun --host algo-1:P -np P --allow-run-as-root --display-map --tag-output`` with the
toolkit's MCA options (TCP on the host's interface, no tree spawn, ``-bind-to none -map-by
slot``, ``ob1``, no openib, abort on a non-zero rank, no vader single-copy), ``-x`` for every
``SM_*`` variable, ``PATH``, ``LD_LIBRARY_PATH`` and ``PYTHONPATH``, the spec's
``custom_mpi_options`` (split like a command line, never run by a shell), and the script as
``python -m mpi4py <script> <args>``. Every rank gets ``--tag-output`` tags, which the supervisor
turns into rank tags.

Across hosts, as SageMaker does it, ``mpirun`` runs on the first host (``--host
algo-1:P,algo-2:P``) and starts Open MPI's daemon (``orted``) on each other host with a remote
shell. There is no sshd between a job's hosts, so its remote shell (``-mca plm_rsh_agent``) is
the job's own (``remote_shell``): the other hosts' agents start the daemon in their host's
keeper, and each of those hosts is done when its daemon is (as SageMaker's worker hosts wait for
``orted`` to finish). The ranks' output reaches the first host through ``mpirun``, so every
rank's lines are in the first host's log, tagged with their rank, as in SageMaker's log stream.
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
EXPORTED = (
    "PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TRAINOPS_YIELD_AT_EXIT",  # the bootstrap's pause at exit (sidecars/_framework.py)
)
NCCL = ("NCCL_MIN_NRINGS=4", "NCCL_SOCKET_IFNAME=lo", "NCCL_DEBUG=INFO")


def mpirun_command(ctx: LaunchContext, mpirun: str) -> list[str]:
    per_host = ctx.processes_per_host
    hosts = ",".join(f"{host}:{per_host}" for host in ctx.hosts)
    argv = [mpirun, "--host", hosts, "-np", str(per_host * len(ctx.hosts))]
    argv += ["--allow-run-as-root", "--display-map", "--tag-output"]
    for name, value in MCA:
        argv += ["-mca", name, value]
    if ctx.remote_shell is not None and len(ctx.hosts) > 1:
        argv += ["-mca", "plm_rsh_agent", _rsh_agent(ctx.remote_shell.agent)]
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


def _rsh_agent(agent: tuple[str, ...]) -> str:
    """The remote shell as one MCA value: Open MPI splits it at white space."""
    if any(not part or any(c.isspace() for c in part) for part in agent):
        raise LaunchError(
            "mpirun across hosts cannot use the job's remote shell: its path has white space "
            f"({' '.join(agent)}); install trainops and Python under a path without spaces"
        )
    return " ".join(agent)


class MpiLauncher:
    name = "mpi"
    max_hosts: int | None = None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        mpirun = shutil.which("mpirun", path=ctx.env.get("PATH"))
        if mpirun is None:
            raise LaunchError(
                "distribution.mpi needs mpirun (Open MPI) on this machine; on Debian: "
                "apt-get install openmpi-bin"
            )
        if len(ctx.hosts) > 1 and ctx.remote_shell is None:
            raise LaunchError("mpirun across hosts needs the job's remote shell, which is off")
        if len(ctx.hosts) > 1 and ctx.master_addr not in ctx.hosts:
            # Without a namespace of its own, every local host is this machine under one name:
            # Open MPI would take two hosts' daemons for one node and their shared memory clash.
            raise LaunchError(
                "mpirun across hosts needs each host's own name (a mount and UTS namespace per "
                "host), which this machine does not allow; run the MPI job on one host"
            )
        if len(ctx.hosts) > 1 and not ctx.is_master:
            # Reached by mpirun's remote shell: the keeper runs this host's orted.
            assert ctx.remote_shell is not None
            return [RankProcess(ctx.remote_shell.keeper, ctx.env | ctx.remote_shell.env)]
        # Each rank learns its rank from Open MPI (OMPI_COMM_WORLD_*); the master is the same
        # for all of them and travels with -x.
        env = {**ctx.env, "MASTER_ADDR": ctx.master_addr, "MASTER_PORT": str(ctx.master_port)}
        argv = mpirun_command(dataclasses.replace(ctx, env=env), mpirun)
        if ctx.remote_shell is not None and len(ctx.hosts) > 1:
            env |= ctx.remote_shell.env
        return [RankProcess(tuple(argv), env, output_tags="mpirun")]
