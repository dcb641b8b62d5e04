"""A real control plane for tests: EmbeddedServer on loopback, fake agents as real processes.

``ControlPlane`` wraps an :class:`EmbeddedServer` whose local backend starts
``tests/control/fake_agent.py`` instead of the real agent, plus an HTTP client for its public
API. Timings are shortened (monitor tick, kill margin) so stop escalation is quick to test.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from trainops._settings import Settings
from trainops.backends import AgentHandle, LocalBackend
from trainops.control import ControllerConfig
from trainops.server import EmbeddedServer
from trainops.store import MetadataStore

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
FAST = ControllerConfig(tick_seconds=0.1, kill_margin_seconds=1.0)
T = TypeVar("T")


def fake_backend(settings: Settings, agent_command: list[str] | None = None) -> LocalBackend:
    return LocalBackend(settings, agent_command=agent_command or [sys.executable, str(FAKE_AGENT)])


def wait_for(predicate: Callable[[], T], timeout: float = 60.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.05)


def code_uri(settings: Settings) -> str:
    """A stand-in sourcedir.tar.gz (the fake agent never opens it)."""
    path = settings.home / "uploads" / "sourcedir.tar.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not really a tarball")
    return path.as_uri()


def job_spec(env: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "entry_point": "train.py",
        "instance_type": "ml.m5.large",
        "environment": env or {},
    } | fields


class ControlPlane:
    """A running embedded server and a client of its public API."""

    def __init__(self, server: EmbeddedServer, client: httpx.Client) -> None:
        self.server = server
        self.client = client
        self.code_uri = code_uri(server.settings)

    def submit(self, name: str, env: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
        body = {"job_name": name, "spec": job_spec(env, **fields), "code_uri": self.code_uri}
        response = self.client.post("/api/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        data: dict[str, Any] = response.json()
        return data

    def describe(self, name: str) -> dict[str, Any]:
        response = self.client.get(f"/api/v1/jobs/{name}")
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    def wait_secondary(self, name: str, *statuses: str, timeout: float = 60) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            job = self.describe(name)
            return job if job["SecondaryStatus"] in statuses else None

        return wait_for(reached, timeout, f"{name} in {statuses}")

    def wait_ended(self, name: str, timeout: float = 60) -> dict[str, Any]:
        def ended() -> dict[str, Any] | None:
            job = self.describe(name)
            return job if job["TrainingJobStatus"] in ("Completed", "Failed", "Stopped") else None

        return wait_for(ended, timeout, f"{name} ended")

    def wait_for_hosts_down(self, name: str, timeout: float = 60) -> list[dict[str, Any]]:
        """The hosts of the current attempt, once every one of them has ended."""
        ended = {"Completed", "Failed", "Stopped", "InternalError", "Lost"}

        def down() -> list[dict[str, Any]] | None:
            hosts: list[dict[str, Any]] = self.describe(name)["Hosts"]
            return hosts if all(h["Status"] in ended for h in hosts) else None

        return wait_for(down, timeout, f"hosts of {name} down")

    def log_lines(self, name: str) -> list[str]:
        response = self.client.get(f"/api/v1/jobs/{name}/logs", params={"limit": 10000})
        return [line["line"] for line in response.json()["lines"]]

    def stop(self, name: str) -> httpx.Response:
        return self.client.post(f"/api/v1/jobs/{name}/stop")

    def agent_handles(self, name: str) -> list[AgentHandle]:
        store = self.server.controller.store
        job = store.get_job(name)
        assert job is not None
        return [AgentHandle(h.handle or {}) for h in store.hosts(name, job.attempt)]


@contextmanager
def control_plane(
    settings: Settings,
    config: ControllerConfig = FAST,
    token: str | None = None,
    agent_command: list[str] | None = None,
    backend: LocalBackend | None = None,
) -> Iterator[ControlPlane]:
    backend = backend or fake_backend(settings, agent_command)
    server = EmbeddedServer(settings, backend=backend, config=config)
    with server:
        # The server's API token: the one given, else the home's (as the CLI and SDK read it).
        headers = {"Authorization": f"Bearer {token or server.token}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
            yield ControlPlane(server, client)


def kill_leftover_agents(settings: Settings) -> None:
    """End agents a failed test left running, so no process outlives the test."""
    if not settings.db_path.exists():
        return
    store = MetadataStore(settings.db_path)
    backend = fake_backend(settings)
    try:
        for job in store.active_jobs(["InProgress", "Stopping"]):
            for host in store.hosts(job.name, job.attempt):
                backend.kill(AgentHandle(host.handle or {}))
    finally:
        store.close()
