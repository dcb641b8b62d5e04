"""End to end on a Ray cluster whose nodes may die: gang scheduling, jobs that can never fit, a
node that dies mid-job, and nothing left running afterwards.

The cluster (a head and three worker nodes of 2 CPUs, each holding one ml.m5.large host) is the
one ``node_cluster`` shares with the other modules that take nodes away (``_ray``): it starts
this module with three live workers, and the last test kills one of them.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._support.processes import assert_nothing_left
from tests._support.ray_cluster import RayCluster
from tests.e2e._harness import CLI, Server, cli_env, describe, trainops, wait_for, write_job
from tests.e2e._ray import ray_server, with_all_workers

pytestmark = pytest.mark.slow

SLEEPER = "import time\nprint('working', flush=True)\ntime.sleep(600)\n"


@pytest.fixture(scope="module")
def cluster(node_cluster: RayCluster) -> RayCluster:
    return with_all_workers(node_cluster)


@pytest.fixture
def server(cluster: RayCluster, tmp_path: Path) -> Iterator[Server]:
    yield from ray_server(cluster, tmp_path / "home")


def _submit(server: Server, folder: Path, script: str, **spec: Any) -> str:
    path = write_job(folder, script, instance_type="ml.m5.large", **spec)
    done = trainops("submit", str(path), home=server.home, **server.env())
    assert done.returncode == 0, done.stderr
    return str(spec["job_name"])


def _job(server: Server, name: str) -> dict[str, Any]:
    return describe(name, server.home, **server.env())


def _status(server: Server, name: str, *wanted: str) -> dict[str, Any] | None:
    job = _job(server, name)
    return job if job["SecondaryStatus"] in wanted else None


def test_a_job_waits_whole_until_the_cluster_has_room(server: Server, tmp_path: Path) -> None:
    holder = _submit(server, tmp_path / "holder", SLEEPER, job_name="holder")
    wait_for(lambda: _status(server, holder, "Training"), timeout=120)
    gang = _submit(server, tmp_path / "gang", "print('all three', flush=True)\n",
                   job_name="gang", instance_count=3)  # fmt: skip
    pending = wait_for(lambda: _status(server, gang, "Pending"), timeout=60)
    assert (
        "has not room for all 3 hosts at once"
        in pending["SecondaryStatusTransitions"][-1]["StatusMessage"]
    )
    time.sleep(3)  # while it waits, not one of its hosts starts
    assert _job(server, gang).get("Hosts", []) == []
    assert trainops("stop", holder, "--wait", home=server.home, **server.env()).returncode == 0
    done = wait_for(lambda: _status(server, gang, "Completed"), timeout=180)
    assert len({host["Node"] for host in done["Hosts"]}) == 3  # a node each
    for job in (holder, gang):
        assert_nothing_left(job, [tmp_path])


def test_a_job_no_set_of_nodes_can_hold_fails_with_the_reason(
    server: Server, tmp_path: Path
) -> None:
    gpu = write_job(tmp_path / "gpu", SLEEPER, job_name="gpu", instance_type="ml.p3.2xlarge")
    wide = write_job(tmp_path / "wide", SLEEPER, job_name="wide", instance_count=4)
    for path in (gpu, wide):
        done = trainops("run", str(path), home=server.home, **server.env())
        assert done.returncode == 1, done.stdout + done.stderr
    reasons = {name: _job(server, name)["FailureReason"] for name in ("gpu", "wide")}
    assert reasons["gpu"].startswith("CapacityError: no node of the Ray cluster can hold a host")
    assert "at most 3 of the 4 hosts" in reasons["wide"], reasons


RETRIED = """
import os, time
marker = os.path.join(os.environ["MARKER_DIR"], os.environ["SM_CURRENT_HOST"])
if os.path.exists(marker):
    print("second attempt", flush=True)
else:
    open(marker, "w").close()
    print("first attempt", flush=True)
    time.sleep(600)
"""


def test_a_dead_node_ends_its_attempt_and_the_job_goes_on_on_healthy_nodes(
    server: Server, cluster: RayCluster, tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    name = _submit(
        server,
        tmp_path / "lost",
        RETRIED,
        job_name="lost",
        instance_count=2,
        environment={"MARKER_DIR": str(markers)},
        retry_strategy={"maximum_retry_attempts": 1},
    )
    job = wait_for(lambda: _status(server, name, "Training"), timeout=120)
    wait_for(lambda: len(list(markers.iterdir())) == 2, timeout=60)
    node = next(h["Node"] for h in job["Hosts"] if h["Host"] == "algo-2").split("/")[1]
    victim = next(w for w, node_id in cluster.node_ids().items() if node_id.startswith(node))
    cluster.kill_node(victim)
    done = wait_for(lambda: _status(server, name, "Completed", "Failed"), timeout=240)
    assert done["SecondaryStatus"] == "Completed", done.get("FailureReason")
    restarting = [t for t in done["SecondaryStatusTransitions"] if t["Status"] == "Restarting"]
    assert restarting and "algo-2" in restarting[0]["StatusMessage"], restarting
    assert "lost" in restarting[0]["StatusMessage"] or "died" in restarting[0]["StatusMessage"]
    logs = trainops("logs", name, home=server.home, **server.env()).stdout
    assert logs.count("second attempt") == 2, logs
    alive = set(cluster.node_ids().values())
    assert all(any(n.startswith(h["Node"].split("/")[1]) for n in alive) for h in done["Hosts"])
    # The dead attempt's agents notice their actors are gone and end what they started.
    assert_nothing_left(name, [tmp_path])
    # Nothing of either attempt holds the cluster: once Ray has written the dead node off (its
    # health checks take a few seconds more), every worker left has all its CPUs free.
    wait_for(lambda: _free_workers(server) == [(2, 2), (2, 2)], timeout=120, interval=1)


def _free_workers(server: Server) -> list[tuple[int, int]]:
    """(free, total) CPUs of each node with CPUs, as `trainops cluster` shows them."""
    shown = subprocess.run(
        [*CLI, "cluster"], env=cli_env(server.home, **server.env()), capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip
    rows = [line.split() for line in shown.splitlines()[2:] if line.strip()]
    cpus = [tuple(int(n) for n in row[1].split("/")) for row in rows]
    return sorted((free, total) for free, total in cpus if total > 0)
