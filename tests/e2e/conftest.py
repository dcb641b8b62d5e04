"""The backends the end-to-end scenarios run on: each scenario that takes ``backend`` runs on
the local backend and on a real multi-node Ray cluster (``ray_cluster``), with the same spec.

``backend`` is the environment the ``trainops`` commands get: nothing for the local backend;
for Ray, the cluster's address and token and ``TRAINOPS_SHARED_PATHS`` naming the temporary
folder (every node of the test cluster is this machine, so it is a path every node shares and
the scenarios' ``file://`` URIs are allowed).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest

from tests._support.ray_cluster import RayCluster
from tests.e2e._ray import ray_cluster_for


@pytest.fixture(params=["local", "ray"])
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "local":
        return {}
    cluster = request.getfixturevalue("ray_cluster")
    return {
        **cluster.client_env(),
        "TRAINOPS_BACKEND": "ray",
        "TRAINOPS_RAY_ADDRESS": cluster.address,
        "TRAINOPS_SHARED_PATHS": tempfile.gettempdir(),
    }


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """The Ray cluster of the modules that take nodes away (``_ray``); each module's ``cluster``
    fixture gives it back its three workers first."""
    yield from ray_cluster_for(tmp_path_factory, "ray-nodes")
