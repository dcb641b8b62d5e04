"""A Ray cluster of three worker nodes on loopback and a ``trainops server`` on it, for the e2e
modules that take nodes away.

They share one cluster (``node_cluster``, session-scoped): each module starts with three live
workers, those that an earlier module took away replaced by new nodes (a killed node is not
given back), which costs a ``ray start`` per node instead of a cluster. Each server has a Ray
namespace of its own, so no module finds another's placement groups or actors (two modules
have a job named ``lost``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.ray_cluster import RayCluster, RayStartError, start_ray_cluster
from tests.e2e._harness import Server

WORKERS = 3


def ray_cluster_for(factory: pytest.TempPathFactory, name: str) -> Iterator[RayCluster]:
    """A cluster of three workers (``yield from`` it in a fixture)."""
    try:
        started = start_ray_cluster(factory.mktemp(name), workers=WORKERS)
    except RayStartError as exc:
        pytest.fail(f"cannot start the Ray cluster: {exc}", pytrace=False)
    yield started
    started.stop()


def with_all_workers(cluster: RayCluster, timeout: float = 120) -> RayCluster:
    """``cluster`` with three live workers again: a new node for each one a module took away
    (a killed node's raylet is gone at once, though Ray lists it alive until written off)."""
    try:
        running = [w for w in cluster.node_ids() if cluster.raylet_running(w)]
        added = cluster.add_workers(WORKERS - len(running))
        deadline = time.monotonic() + timeout
        while not set(running + added) <= set(cluster.node_ids()):
            if time.monotonic() > deadline:
                raise RayStartError(f"the cluster has not got its {WORKERS} workers back")
            time.sleep(0.5)
    except RayStartError as exc:
        pytest.fail(f"cannot give the Ray cluster its workers back: {exc}", pytrace=False)
    return cluster


def ray_server(cluster: RayCluster, home: Path) -> Iterator[Server]:
    """A ``trainops server`` whose backend is ``cluster`` (``/tmp`` shared by every node)."""
    env = {
        **cluster.client_env(),
        "TRAINOPS_BACKEND": "ray",
        "TRAINOPS_RAY_ADDRESS": cluster.address,
        "TRAINOPS_SHARED_PATHS": "/tmp",
        "TRAINOPS_RAY_NAMESPACE": f"trainops-{secrets.token_hex(4)}",
    }
    running = Server(home, **env).start()
    yield running
    running.stop()
