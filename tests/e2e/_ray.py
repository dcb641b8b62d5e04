"""A Ray cluster of three worker nodes on loopback and a ``trainops server`` on it, for the e2e
modules that take nodes away (each starts its own cluster: a killed node is not given back)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.ray_cluster import RayCluster, RayStartError, start_ray_cluster
from tests.e2e._harness import Server


def ray_cluster_for(factory: pytest.TempPathFactory, name: str) -> Iterator[RayCluster]:
    """A module's cluster (``yield from`` it in a module-scoped fixture)."""
    try:
        started = start_ray_cluster(factory.mktemp(name), workers=3)
    except RayStartError as exc:
        pytest.fail(f"cannot start the Ray cluster: {exc}", pytrace=False)
    yield started
    started.stop()


def ray_server(cluster: RayCluster, home: Path) -> Iterator[Server]:
    """A ``trainops server`` whose backend is ``cluster`` (``/tmp`` shared by every node)."""
    env = {
        **cluster.client_env(),
        "TRAINOPS_BACKEND": "ray",
        "TRAINOPS_RAY_ADDRESS": cluster.address,
        "TRAINOPS_SHARED_PATHS": "/tmp",
    }
    running = Server(home, **env).start()
    yield running
    running.stop()
