"""Where this process sits in its job: rank, world size, host, master — read from the environment.

Every launcher trainops has (plain, torchrun, mpirun) and the ones scripts are written for
(torchrun, SageMaker's MPI runner) describe a process with environment variables; this module
reads whichever set is present, without importing torch, so a script run by hand still gets a
world of one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["DEFAULT_MASTER_PORT", "DistributedError", "World"]

DEFAULT_MASTER_PORT = 7777  # what SageMaker's PyTorch containers use


class DistributedError(RuntimeError):
    """The environment does not describe a consistent process group."""


@dataclass(frozen=True, slots=True)
class World:
    """This process's place in the job. Ranks of one host are contiguous: host n holds
    ranks ``n * local_world_size`` to ``(n + 1) * local_world_size - 1``."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    master_addr: str
    master_port: int

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes checkpoints, evaluates and reports."""
        return self.rank == 0

    @property
    def is_local_main(self) -> bool:
        return self.local_rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> World:
        env = os.environ if environ is None else environ
        rank = _first_int(env, ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"), 0)
        size = _first_int(env, ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"), 1)
        local_rank = _first_int(env, ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"), 0)
        local_size = _first_int(env, ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"), 1)
        hosts = _sm_hosts(env)
        default_nodes = max(len(hosts), 1) if size == 1 else size // max(local_size, 1)
        node_rank = _first_int(env, ("GROUP_RANK", "NODE_RANK"), rank // max(local_size, 1))
        world = cls(
            rank=rank,
            world_size=size,
            local_rank=local_rank,
            local_world_size=local_size,
            node_rank=node_rank,
            num_nodes=default_nodes,
            master_addr=env.get("MASTER_ADDR") or (hosts[0] if hosts else "127.0.0.1"),
            master_port=_first_int(env, ("MASTER_PORT",), DEFAULT_MASTER_PORT),
        )
        world.check()
        return world

    def check(self) -> None:
        """Refuse a world whose numbers contradict each other, naming them."""
        if not 0 <= self.rank < self.world_size:
            raise DistributedError(f"RANK={self.rank} is outside WORLD_SIZE={self.world_size}")
        if not 0 <= self.local_rank < self.local_world_size:
            raise DistributedError(
                f"LOCAL_RANK={self.local_rank} is outside LOCAL_WORLD_SIZE={self.local_world_size}"
            )
        if self.world_size > 1 and self.world_size % self.local_world_size:
            raise DistributedError(
                f"WORLD_SIZE={self.world_size} is not a multiple of "
                f"LOCAL_WORLD_SIZE={self.local_world_size} (hosts must run equal process counts)"
            )

    def host_ranks(self, node: int | None = None) -> list[int]:
        """The global ranks on host ``node`` (default: this one)."""
        n = self.node_rank if node is None else node
        return list(range(n * self.local_world_size, (n + 1) * self.local_world_size))


def _first_int(env: Mapping[str, str], names: tuple[str, ...], default: int) -> int:
    for name in names:
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        try:
            return int(raw)
        except ValueError:
            raise DistributedError(f"{name}={raw!r} is not an integer") from None
    return default


def _sm_hosts(env: Mapping[str, str]) -> list[str]:
    raw = env.get("SM_HOSTS")
    if not raw:
        return []
    try:
        hosts = json.loads(raw)
    except json.JSONDecodeError:
        raise DistributedError(f"SM_HOSTS={raw!r} is not a JSON list") from None
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise DistributedError(f"SM_HOSTS={raw!r} is not a JSON list of host names")
    return hosts
