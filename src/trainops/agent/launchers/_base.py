"""The launcher contract: a host's assignment in, the processes to start out.

A launcher never starts anything itself. Given a :class:`LaunchContext` (the job's typed spec,
where this host sits among the job's hosts, the script's command and environment) it returns the
:class:`RankProcess` list this host runs; the agent's process-group supervisor starts them,
tags their output with host and rank, and brings them all down when the first one fails.
"""

from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from trainops.protocol import SubmittedJob

__all__ = [
    "LaunchContext",
    "LaunchError",
    "Launcher",
    "RankProcess",
    "RemoteShellPaths",
    "job_port",
    "remote_shell_paths",
    "rendezvous_env",
]

PORT_BASE, PORT_SPAN = 20000, 10000


class LaunchError(RuntimeError):
    """The launcher cannot start this host's processes here; the message says why."""


@dataclass(frozen=True, slots=True)
class RemoteShellPaths:
    """How a launcher reaches the job's other hosts with a remote shell (there is no sshd
    between them; see ``remote_shell``): ``agent`` is an ssh-like command (``agent HOST WORD…``)
    that needs ``env`` in its environment; ``keeper`` is the process a host reached this way
    runs (it runs what the agent sends and ends when all of that has ended), with ``env`` in its
    environment too. ``env`` holds the host's remote-shell key: give it to the job's processes
    only, never on a command line (anyone on the machine reads those)."""

    agent: tuple[str, ...]
    env: dict[str, str]
    keeper: tuple[str, ...]


def remote_shell_paths(directory: Path, key: str, python: str = sys.executable) -> RemoteShellPaths:
    """The remote shell of a host whose agent serves it from ``directory`` with ``key``."""
    from trainops.agent.launchers import remote_shell

    module = str(Path(remote_shell.__file__).resolve())
    return RemoteShellPaths(
        agent=(python, module, "rsh"),
        env={remote_shell.SOCKET_ENV: str(directory / "rsh.sock"), remote_shell.KEY_ENV: key},
        keeper=(python, module, "keeper", "--socket", str(directory / "keeper.sock")),
    )


@dataclass(frozen=True, slots=True)
class LaunchContext:
    """Everything a launcher may read. ``command`` is the script's own argv (``python
    train.py --lr 0.1``); ``python`` and ``script_args`` are its parts where it is a Python
    program; ``env`` is the script environment of the SageMaker contract; ``remote_shell`` is
    how to start programs on the other hosts (``None`` on a job of one host)."""

    job: SubmittedJob
    job_name: str
    attempt: int
    hosts: tuple[str, ...]
    current_host: str
    command: tuple[str, ...]
    python: str
    entry_point: str
    script_args: tuple[str, ...]
    env: dict[str, str]
    master_addr: str
    master_port: int
    remote_shell: RemoteShellPaths | None = None

    @property
    def host_index(self) -> int:
        return self.hosts.index(self.current_host)

    @property
    def is_master(self) -> bool:
        return self.host_index == 0

    @property
    def processes_per_host(self) -> int:
        return self.job.distribution.processes_per_host

    @property
    def world_size(self) -> int:
        return len(self.hosts) * self.processes_per_host


@dataclass(frozen=True, slots=True)
class RankProcess:
    """One process to start: its argv and complete environment, and the rank its output is
    tagged with: ``None`` where the host runs one process (its host's name tags it) and for a
    process that is not one rank (torchrun, mpirun, a parameter server).

    ``output_tags``: the process starts the host's ranks itself and tags each of their lines:
    ``"torchrun"`` (``[default<local rank>]:``, torchrun's ``--tee``; the rank is ``rank_base +
    local rank``, and such a process starts ``rank_count`` ranks) or ``"mpirun"`` (``[<job>,<rank>]<stdout>:``, ``--tag-output``). The
    supervisor strips the tag and tags the line with its rank (and stream) instead.

    ``auxiliary``: a helper beside the script (a parameter server): the host is done when its
    other processes are, and the helper is then stopped — once nothing listens on
    ``release_after`` (host, port) any more, where that is set.
    """

    argv: tuple[str, ...]
    env: dict[str, str] = field(repr=False)
    rank: int | None = None
    local_rank: int | None = None
    output_tags: str | None = None
    rank_base: int = 0
    rank_count: int = 0
    auxiliary: bool = False
    release_after: tuple[str, int] | None = None


class Launcher(Protocol):
    """Turns a host's assignment into the processes it runs. ``max_hosts`` is the most hosts it
    can span (``None``: any number); the control plane refuses larger jobs at submission."""

    name: str
    max_hosts: int | None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]: ...


def rendezvous_env(ctx: LaunchContext, local_rank: int) -> dict[str, str]:
    """The variables ``torch.distributed``'s ``env://`` (and torchrun's scripts) read."""
    per_host = ctx.processes_per_host
    return {
        "MASTER_ADDR": ctx.master_addr,
        "MASTER_PORT": str(ctx.master_port),
        "RANK": str(ctx.host_index * per_host + local_rank),
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(ctx.world_size),
        "LOCAL_WORLD_SIZE": str(per_host),
        "GROUP_RANK": str(ctx.host_index),
        "NODE_RANK": str(ctx.host_index),
        "GROUP_WORLD_SIZE": str(len(ctx.hosts)),
        "ROLE_RANK": str(ctx.host_index * per_host + local_rank),
        "ROLE_WORLD_SIZE": str(ctx.world_size),
    }


def job_port(job_name: str, attempt: int, scope: str = "") -> int:
    """The job's rendezvous port: the same on every host, spread over a range so that jobs on
    one machine rarely meet (each attempt gets another, so a retry never finds it held).
    ``scope`` tells apart jobs of the same name that are not the same job (see
    ``trainops.agent._ranks.rendezvous_scope``: under two homes, say)."""
    return PORT_BASE + zlib.crc32(f"{scope}|{job_name}/{attempt}".encode()) % PORT_SPAN
