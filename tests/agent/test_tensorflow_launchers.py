"""TensorFlow launchers with real TensorFlow: 2 hosts, TF_CONFIG as SageMaker writes it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.agent._support import JobFixture, make_hosts, run_together
from trainops.agent.supervision._hostns import namespaces_available
from trainops.protocol import HostOutcome

pytestmark = pytest.mark.slow
tf = require_extra("tensorflow")

MWMS = """
import json, os
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
@tf.function
def step():
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(index + 1)))
total = strategy.experimental_local_results(strategy.run(step))[0]
print(f"replicas={strategy.num_replicas_in_sync} sum={float(total):g}", flush=True)
"""

# What a TensorFlow 2 script does with SageMaker's parameter-server TF_CONFIG: TF 2 calls the
# coordinator "chief" where SageMaker's container says "master"; workers serve until the master
# is gone.
PARAMETER_SERVER = """
import json, os, socket, time
import tensorflow as tf
config = json.loads(os.environ["TF_CONFIG"])
cluster = {("chief" if k == "master" else k): v for k, v in config["cluster"].items()}
task = config["task"]

def up(address):
    host, port = address.split(":")
    try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
        return True
    except OSError:
        return False

def wait_up(addresses):  # the other hosts' servers may still be importing TensorFlow
    deadline = time.time() + 180
    while not all(up(a) for a in addresses) and time.time() < deadline:
        time.sleep(0.2)

if task["type"] == "worker":
    spec = tf.train.ClusterSpec(cluster)
    tf.distribute.Server(spec, job_name="worker", task_index=task["index"], start=True)
    wait_up(cluster["chief"])  # the chief's server opens once it has found every task
    host, port = config["cluster"]["master"][0].split(":")
    while True:
        time.sleep(0.5)
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
        except OSError:
            break
    print("worker done: the master is gone", flush=True)
else:
    wait_up(cluster["worker"] + cluster["ps"])  # TensorFlow connects once, at the start
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        v = tf.Variable(0.0)
    @tf.function
    def step():
        v.assign_add(1.0)
        return v.read_value()
    for _ in range(4):
        coordinator.schedule(step)
    coordinator.join()
    print(f"variable on {v.device.split('/')[1]} value={float(v.numpy()):g}", flush=True)
"""


def _two_hosts(tmp_path: Path, script: str, **spec: Any) -> list[JobFixture]:
    if not namespaces_available():
        pytest.skip("two local hosts need mount/UTS namespaces for their names")
    files = {"train.py": script}
    # a job name of its own: its hosts' addresses (127.X.Y.N) come from it, and TensorFlow's
    # ports are fixed, so the last test's servers, still going away, cannot hold them
    name = f"tf-{uuid.uuid4().hex[:8]}"
    env = {"TF_CPP_MIN_LOG_LEVEL": "2"}
    jobs = make_hosts(tmp_path, files, environment=env, job_name=name, **spec)
    results = run_together(jobs)
    outcomes = [r.outcome for r in results]
    assert outcomes == [HostOutcome.COMPLETED] * 2, [job.reporter.lines() for job in jobs]
    return jobs


def test_multi_worker_mirrored_strategy_spans_both_hosts(tmp_path: Path) -> None:
    jobs = _two_hosts(
        tmp_path, MWMS, distribution={"multi_worker_mirrored_strategy": {"enabled": True}}
    )
    for job in jobs:
        assert "replicas=2 sum=3" in job.reporter.lines("stdout")


def test_parameter_servers_hold_the_variables_until_the_master_is_done(tmp_path: Path) -> None:
    jobs = _two_hosts(
        tmp_path, PARAMETER_SERVER, distribution={"parameter_server": {"enabled": True}}
    )
    master, worker = (j.reporter.lines("stdout") for j in jobs)
    assert "variable on job:ps value=4" in master
    assert "worker done: the master is gone" in worker
    for job in jobs:  # each host's parameter server ran beside its script
        assert any("parameter server" in line for line in job.reporter.lines("stdout"))
