"""End to end on a Ray cluster whose nodes go: a spot job whose node Ray drains for preemption gets
the notice and resumes from its checkpoint on the nodes that remain; a spot job whose node dies
is interrupted (not failed: it has no retries to spend) and resumes too.

The cluster (a head and three worker nodes of 2 CPUs, each holding one ml.m5.large host) is the
one ``node_cluster`` shares with the other modules that take nodes away (``_ray``): it starts this
module with three live workers, and its tests take two of them away, one each.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._support.processes import assert_nothing_left
from tests._support.ray_cluster import RayCluster
from tests.e2e._harness import Server, describe, trainops, wait_for, write_job
from tests.e2e._ray import ray_server, with_all_workers

pytestmark = pytest.mark.slow

# Counts, a step each 0.2 s, saving its step to the checkpoint folder after each (to STEPS; a
# resumed run does 5 steps more); on SIGTERM (the notice) it records the signal, saves and
# exits. At start it resumes from the step saved, and says so.
COUNTER = """
import os, signal, sys, time
host = os.environ["SM_CURRENT_HOST"]
saved = os.path.join(os.environ["SM_CHECKPOINT_DIR"], f"step-{host}")
step = int(open(saved).read()) if os.path.exists(saved) else 0
print(f"{host} resumed from {step}", flush=True)
end = step + 5 if step else int(os.environ["STEPS"])

def save(n):
    open(saved + ".tmp", "w").write(str(n))
    os.replace(saved + ".tmp", saved)

def noticed(signum, frame):
    open(os.path.join(os.environ["MARKS"], f"sigterm-{host}-at-{step}"), "w").close()
    save(step)
    sys.exit(0)

signal.signal(signal.SIGTERM, noticed)
open(os.path.join(os.environ["MARKS"], f"running-{host}"), "w").close()
while step < end:
    step += 1
    save(step)
    time.sleep(0.2)
print(f"{host} done at {step}", flush=True)
"""


@pytest.fixture(scope="module")
def cluster(node_cluster: RayCluster) -> RayCluster:
    return with_all_workers(node_cluster)


@pytest.fixture
def server(cluster: RayCluster, tmp_path: Path) -> Iterator[Server]:
    yield from ray_server(cluster, tmp_path / "home")


def _submit_spot(server: Server, folder: Path, name: str, count: int, steps: int) -> Path:
    marks = folder / "marks"
    marks.mkdir(parents=True)
    path = write_job(
        folder,
        COUNTER,
        job_name=name,
        instance_type="ml.m5.large",
        instance_count=count,
        use_spot_instances=True,
        stopping_condition={"max_runtime_in_seconds": 600, "max_wait_time_in_seconds": 1200},
        checkpoint={"uri": (folder / "checkpoints").as_uri()},
        environment={"MARKS": str(marks), "STEPS": str(steps)},
    )
    done = trainops("submit", str(path), home=server.home, **server.env())
    assert done.returncode == 0, done.stderr
    return marks


def _job(server: Server, name: str) -> dict[str, Any]:
    return describe(name, server.home, **server.env())


def _ended(server: Server, name: str) -> dict[str, Any] | None:
    job = _job(server, name)
    return job if job["TrainingJobStatus"] in ("Completed", "Failed", "Stopped") else None


def _worker_of(cluster: RayCluster, job: dict[str, Any], host: str) -> str:
    node = next(h["Node"] for h in job["Hosts"] if h["Host"] == host).split("/")[1]
    return next(w for w, node_id in cluster.node_ids().items() if node_id.startswith(node))


def _drain(cluster: RayCluster, worker: str, deadline_s: int) -> None:
    node_id = cluster.node_ids()[worker]
    ray = Path(sys.executable).parent / "ray"
    command = [str(ray), "drain-node", "--address", cluster.address, "--node-id", node_id,
               "--reason", "DRAIN_NODE_REASON_PREEMPTION", "--reason-message", "spot reclaimed",
               "--deadline-remaining-seconds", str(deadline_s)]  # fmt: skip
    done = subprocess.run(command, env=cluster.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-1000:]


def _statuses(job: dict[str, Any]) -> list[str]:
    return [t["Status"] for t in job["SecondaryStatusTransitions"]]


def _message(job: dict[str, Any], status: str) -> str:
    return next(
        t["StatusMessage"] for t in job["SecondaryStatusTransitions"] if t["Status"] == status
    )


def _resumed(server: Server, name: str) -> list[int]:
    logs = trainops("logs", name, home=server.home, **server.env()).stdout
    return [int(line.rsplit(" ", 1)[1]) for line in logs.splitlines() if " resumed from " in line]


def test_a_drained_node_gives_the_notice_and_the_job_resumes_on_the_nodes_left(
    server: Server, cluster: RayCluster, tmp_path: Path
) -> None:
    marks = _submit_spot(server, tmp_path / "drained", "drained", count=2, steps=600)
    wait_for(lambda: len(list(marks.glob("running-*"))) == 2, timeout=180)
    first = _job(server, "drained")
    victim = _worker_of(cluster, first, "algo-2")
    _drain(cluster, victim, deadline_s=60)
    done = wait_for(lambda: _ended(server, "drained"), timeout=300)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    statuses = _statuses(done)
    interrupted = statuses.index("Interrupted")
    assert statuses[interrupted + 1 :][:1] in (["Pending"], ["Starting"]), statuses
    assert "Training" in statuses[interrupted:], statuses
    assert "draining node" in _message(done, "Interrupted"), _message(done, "Interrupted")
    # The notice reached both hosts (an interruption of one host restarts the whole job) while
    # their node was still there, and they saved on it.
    noticed = sorted(p.name for p in marks.glob("sigterm-*"))
    assert [n.split("-at-")[0] for n in noticed] == ["sigterm-algo-1", "sigterm-algo-2"], noticed
    assert all(int(n.split("-at-")[1]) > 0 for n in noticed)
    resumed = _resumed(server, "drained")
    assert sorted(resumed)[:2] == [0, 0] and all(step > 0 for step in sorted(resumed)[2:])
    assert len(resumed) == 4, resumed
    assert victim not in cluster.node_ids()  # drained and idle, the node went
    assert done["Interruptions"] == 1
    assert_nothing_left("drained", [tmp_path])


def test_a_lost_node_interrupts_a_spot_job_which_resumes_from_its_checkpoint(
    server: Server, cluster: RayCluster, tmp_path: Path
) -> None:
    marks = _submit_spot(server, tmp_path / "lost", "lost", count=1, steps=600)
    wait_for(lambda: list(marks.glob("running-*")), timeout=180)
    job = _job(server, "lost")
    wait_for(lambda: (tmp_path / "lost" / "checkpoints" / "step-algo-1").exists(), timeout=60)
    cluster.kill_node(_worker_of(cluster, job, "algo-1"))
    done = wait_for(lambda: _ended(server, "lost"), timeout=300)
    # No retry_strategy: were the lost host taken for an internal error, the job would fail.
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert "Interrupted" in _statuses(done) and "Restarting" not in _statuses(done)
    assert "was lost" in _message(done, "Interrupted"), _message(done, "Interrupted")
    assert done["Interruptions"] == 1
    assert not list(marks.glob("sigterm-*"))  # no notice: the node was gone at once
    resumed = _resumed(server, "lost")
    assert len(resumed) == 2 and resumed[0] == 0 and resumed[1] > 0, resumed
    assert_nothing_left("lost", [tmp_path])
