"""The Ray backend's preemptions on a real cluster of its own: a node Ray drains for preemption
gives its hosts the notice (with Ray's deadline) while they still run; a node that dies is
reported gone, before its hosts are; each node once.

The cluster (a head and two worker nodes) is this module's: its tests take both workers away.
This process is a driver of one cluster at a time, so the module connects to its own and
leaves the session's to be reconnected on next use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests._support.ray_cluster import RayCluster, RayStartError, start_ray_cluster
from trainops.backends import AgentHandle, Preemption
from trainops.backends._ray import RayBackend
from trainops.catalog import get_instance_type
from trainops.protocol import AgentLaunch, HostResources

pytestmark = pytest.mark.slow

SLEEPER = "import time\ntime.sleep(300)\n"
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    try:
        started = start_ray_cluster(tmp_path_factory.mktemp("ray-preemption"), workers=2)
    except RayStartError as exc:
        pytest.fail(f"cannot start the Ray cluster: {exc}", pytrace=False)
    saved = {k: v for k, v in os.environ.items() if k.startswith("RAY_")}
    os.environ.update(started.client_env())  # before Ray reads its token
    import ray

    ray.shutdown()
    try:
        yield started
    finally:
        ray.shutdown()
        for name in started.client_env():
            os.environ.pop(name, None)
        os.environ.update(saved)
        started.stop()


def _wait(probe: Callable[[], T | None], what: str, timeout: float = 90) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen in {timeout} s")


def _start_host(backend: RayBackend, home: Path, job: str) -> AgentHandle:
    backend.reserve(job, get_instance_type("ml.m5.large"), 1)
    base = home / "jobs" / job / "attempt-1"
    launch = AgentLaunch(
        server_url="http://127.0.0.1:9",
        token="agent-token",
        job_name=job,
        host="algo-1",
        attempt=1,
        root=base / "algo-1",
        state_dir=base / ".agents" / "algo-1",
    )
    return backend.launch(launch, HostResources(cpus=[0]), {})


def _drain(cluster: RayCluster, node_id: str, deadline_s: int) -> None:
    ray = Path(sys.executable).parent / "ray"
    command = [str(ray), "drain-node", "--address", cluster.address, "--node-id", node_id,
               "--reason", "DRAIN_NODE_REASON_PREEMPTION", "--reason-message", "spot reclaimed",
               "--deadline-remaining-seconds", str(deadline_s)]  # fmt: skip
    done = subprocess.run(command, env=cluster.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-1000:]


def _worker_of(cluster: RayCluster, handle: AgentHandle) -> tuple[str, str]:
    node = str(handle.data["node"])
    return next((w, n) for w, n in cluster.node_ids().items() if n == node)


def test_a_drained_node_gives_its_hosts_the_deadline_while_they_run(
    cluster: RayCluster, tmp_path: Path
) -> None:
    backend = RayBackend(cluster.settings(tmp_path), agent_command=[sys.executable, "-c", SLEEPER])
    backend.open()
    assert backend.take_preemptions() == []  # nothing taken away yet
    handle = _start_host(backend, tmp_path, "drained")
    worker, node_id = _worker_of(cluster, handle)
    asked = time.time()
    _drain(cluster, node_id, deadline_s=40)
    taken = _wait(backend.take_preemptions, "the drain's report")
    assert len(taken) == 1, taken
    (report,) = taken
    assert report.node == backend.node_of(handle)
    assert report.deadline is not None and asked + 35 < report.deadline < time.time() + 41
    assert "draining node" in report.reason and "for preemption" in report.reason
    assert backend.is_alive(handle)  # Ray ends nothing itself: the hosts have their notice
    assert backend.take_preemptions() == []  # once
    backend.kill(handle)
    backend.release("drained")
    # Idle now, the drained node goes; it was reported already.
    _wait(lambda: worker not in cluster.node_ids(), "the drained node's exit")
    assert backend.take_preemptions() == []


def test_a_lost_node_is_reported_gone_before_its_hosts_are(
    cluster: RayCluster, tmp_path: Path
) -> None:
    backend = RayBackend(cluster.settings(tmp_path), agent_command=[sys.executable, "-c", SLEEPER])
    backend.open()
    backend.take_preemptions()  # what earlier tests took away
    handle = _start_host(backend, tmp_path, "lost")
    worker, _ = _worker_of(cluster, handle)
    cluster.kill_node(worker)

    def reported() -> list[Preemption]:
        # The control plane's order on a tick: each host's liveness, then the preemptions.
        assert backend.is_alive(handle), "the host was found gone before its node was"
        return backend.take_preemptions()

    (report,) = _wait(reported, "the lost node's report")
    assert report == Preemption(backend.node_of(handle) or "", report.reason, None)
    assert "was lost" in report.reason, report.reason
    _wait(lambda: not backend.is_alive(handle), "the host's end")
    assert "died" in (backend.gone_reason(handle) or "")
    assert backend.take_preemptions() == []  # once, also when Ray writes the node off
    backend.release("lost")


def test_a_new_control_plane_hears_of_the_nodes_already_gone(
    cluster: RayCluster, tmp_path: Path
) -> None:
    backend = RayBackend(cluster.settings(tmp_path))
    backend.open()

    found: list[Preemption] = []

    def both() -> list[Preemption] | None:
        found.extend(backend.take_preemptions())
        return found if len(found) == 2 else None

    reports = _wait(both, "Ray writing the lost node off", timeout=120)
    assert all(p.deadline is None for p in reports), reports
    reasons = " | ".join(p.reason for p in reports)
    assert "was lost: health check failed" in reasons, reasons
    assert "reclaimed (drained for preemption): spot reclaimed" in reasons, reasons
