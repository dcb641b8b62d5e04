"""TensorFlow launchers: ``TF_CONFIG`` per process, as SageMaker's TensorFlow container writes it.

``multi_worker_mirrored_strategy``: every process is a ``worker`` of one cluster,
``{"cluster": {"worker": ["algo-1:8890", "algo-2:8891", …]}, "environment": "cloud", "task":
{"type": "worker", "index": i}}`` (one process per host unless ``processes_per_host`` says
more).

``parameter_server`` (more than one host): the first host is the ``master``, the others are
``worker``s, and every host also runs a parameter server (``ps``) in a process of its own,
beside the script.

SageMaker gives every host the same ports (8890; 2222 and 2223). TensorFlow's servers listen
on every address of their machine, so hosts that share one machine (the local backend) would
collide: here process ``i`` of the cluster uses port ``8890 + i``, and host ``i`` uses
``2222 + 2i`` (its task) and ``2223 + 2i`` (its parameter server). Scripts read the addresses
from ``TF_CONFIG``, so they do not notice. A host's parameter server keeps serving until the
master's script has ended (SageMaker's container waits for the master the same way), then it is
stopped. With one host there is no cluster: the script runs as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainops.agent.launchers._base import LaunchContext, RankProcess, rendezvous_env

__all__ = [
    "MultiWorkerMirroredLauncher",
    "ParameterServerLauncher",
    "mwms_config",
    "ps_config",
    "task_port",
]

MWMS_PORT, TASK_PORT = 8890, 2222
PS_SERVER = Path(__file__).with_name("tf_ps_server.py")


def mwms_config(hosts: tuple[str, ...], per_host: int, index: int) -> dict[str, Any]:
    workers = [
        f"{host}:{MWMS_PORT + h * per_host + k}"
        for h, host in enumerate(hosts)
        for k in range(per_host)
    ]
    return {
        "cluster": {"worker": workers},
        "environment": "cloud",
        "task": {"index": index, "type": "worker"},
    }


def ps_config(hosts: tuple[str, ...], current: str, *, ps_task: bool = False) -> dict[str, Any]:
    cluster: dict[str, list[str]] = {"master": [f"{hosts[0]}:{task_port(0)}"]}
    cluster["ps"] = [f"{host}:{task_port(i) + 1}" for i, host in enumerate(hosts)]
    if len(hosts) > 1:
        cluster["worker"] = [f"{host}:{task_port(i)}" for i, host in enumerate(hosts) if i]
    if ps_task:
        task = {"index": hosts.index(current), "type": "ps"}
    elif current == hosts[0]:
        task = {"index": 0, "type": "master"}
    else:
        task = {"index": hosts.index(current) - 1, "type": "worker"}
    return {"cluster": cluster, "environment": "cloud", "task": task}


def task_port(host_index: int) -> int:
    return TASK_PORT + 2 * host_index


class MultiWorkerMirroredLauncher:
    name = "multi_worker_mirrored_strategy"
    max_hosts: int | None = None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        per_host = ctx.processes_per_host
        found = []
        for local in range(per_host):
            rank = ctx.host_index * per_host + local
            config = mwms_config(ctx.hosts, per_host, rank)
            env = {**ctx.env, **rendezvous_env(ctx, local), "TF_CONFIG": json.dumps(config)}
            tagged = per_host > 1  # one process per host needs no rank tag
            found.append(
                RankProcess(
                    ctx.command,
                    env,
                    rank=rank if tagged else None,
                    local_rank=local if tagged else None,
                )
            )
        return found


class ParameterServerLauncher:
    name = "parameter_server"
    max_hosts: int | None = None

    def processes(self, ctx: LaunchContext) -> list[RankProcess]:
        rendezvous = rendezvous_env(ctx, 0)  # one script per host (the spec refuses more)
        if len(ctx.hosts) == 1:
            return [RankProcess(ctx.command, {**ctx.env, **rendezvous})]
        task = ps_config(ctx.hosts, ctx.current_host)
        ps = ps_config(ctx.hosts, ctx.current_host, ps_task=True)
        script = RankProcess(
            ctx.command,
            {**ctx.env, **rendezvous, "TF_CONFIG": json.dumps(task)},
        )
        server = RankProcess(
            # Run by path with the job's Python (which has TensorFlow, and may not have trainops).
            (ctx.python, str(PS_SERVER)),
            {**ctx.env, "TF_CONFIG": json.dumps(ps)},
            auxiliary=True,
            release_after=(ctx.hosts[0], task_port(0)),
        )
        return [script, server]
