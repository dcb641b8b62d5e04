"""The server's own routes: ``/health``, ``/info`` (version, backend, region, capacity) and
``/cluster`` (the machines the backend runs agents on, with what each has and what is free)."""

from __future__ import annotations

from typing import Any

from trainops._settings import Settings
from trainops._version import __version__
from trainops.control import JobController
from trainops.server._routing import Operation
from trainops.server.routes._shapes import AMOUNTS, API, STRING, amounts, json_object

__all__ = ["ClusterRoutes"]


class ClusterRoutes:
    """What the server is and what its backend has: each handler answers from ``controller``."""

    def __init__(self, controller: JobController, settings: Settings) -> None:
        self.controller = controller
        self.settings = settings

    # The handlers' docstrings are their operations' descriptions in the OpenAPI document.

    def health(self) -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    def info(self) -> dict[str, Any]:
        backend = self.controller.backend
        return {
            "version": __version__,
            "backend": backend.name,
            "default_output_uri": self.settings.default_output_uri,
            "region": self.settings.region,
            "capacity": amounts(backend.capacity()),
        }

    def cluster(self) -> dict[str, Any]:
        """The machines the backend runs agents on, with what each has and what is free."""
        backend = self.controller.backend
        return {
            "backend": backend.name,
            "nodes": [
                {"node": node.name, "capacity": amounts(node.capacity), "free": amounts(node.free)}
                for node in backend.nodes()
            ],
        }

    def operations(self) -> list[Operation]:
        """``/health`` (open to all), ``/info`` and ``/cluster``, in this order."""
        return [
            Operation(
                "GET",
                f"{API}/health",
                self.health,
                store=False,
                returns=json_object("status", "version", status=STRING, version=STRING),
            ),
            Operation(
                "GET",
                f"{API}/info",
                self.info,
                auth="token",
                returns=json_object(
                    "version",
                    "backend",
                    "region",
                    "capacity",
                    version=STRING,
                    backend=STRING,
                    region=STRING,
                    capacity=AMOUNTS,
                ),
            ),
            Operation(
                "GET",
                f"{API}/cluster",
                self.cluster,
                auth="token",
                returns=json_object("backend", "nodes", backend=STRING, nodes=_NODES),
            ),
        ]


_NODES = {
    "type": "array",
    "items": json_object("node", "capacity", "free", node=STRING, capacity=AMOUNTS, free=AMOUNTS),
}
