"""A real multi-node Ray cluster on this machine, for the Ray backend's tests.

:func:`start_ray_cluster` runs ``ray start --head`` (no CPUs of its own: jobs go to the
workers) and one ``ray start --address`` per worker, each a node with its own node id and its
own custom resources (``worker1``, ``worker2``, … and ``ml.m5.large``). Every process carries a
marker variable; :meth:`RayCluster.stop` kills every process that has it (Ray re-parents its
workers, so a process-group kill would miss some), and :meth:`RayCluster.kill_node` kills one
worker node's raylet and workers, as a machine dying would.

Nodes bind 127.0.0.1. Ray treats a cluster on loopback as single-machine unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is set, so it is; authentication is Ray's token mode, the
token passed in the environment so nothing is written to ``~/.ray``.

Starting a cluster is most of what a Ray test module costs on two cores, so it starts only what
the tests use: no autoscaler monitor and no log monitors (every driver here runs with
``log_to_driver=False``), and the Ray client server on a free port instead of the fixed 10001
that a second cluster on the machine would find taken. The head's health checks of its nodes
are quicker than Ray's defaults (:data:`HEALTH_CHECKS`), so a killed node is written off in
seconds rather than ~15 s; a node still has the default 10 s to answer each check, so a slow
node under load is not taken for dead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from trainops._settings import RaySettings, Settings

__all__ = ["RayCluster", "RayStartError", "start_ray_cluster"]

MARKER = "TRAINOPS_TEST_RAY_CLUSTER"
WORKER_CPUS = 2
WORKER_MEMORY = 16 * 1024**3  # a resource figure: ml.m5.large's 8 GiB must fit one host
# One token for every cluster this process starts: Ray reads a driver's token once per process,
# so a test that joins a cluster of its own after the session's must find the same one.
_TOKEN = secrets.token_hex(32)
# Read by the head's GCS: a check each second, three failed in a row write a node off (Ray's
# defaults: 5 s before the first, every 3 s, five failures); each check waits 10 s as by default.
HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


class RayStartError(RuntimeError):
    """The cluster did not come up; the message says which node and why."""


@dataclass
class RayCluster:
    """A running cluster: its address, the environment that reaches it, its worker nodes."""

    address: str
    env: dict[str, str] = field(repr=False)
    workdir: Path
    marker: str
    temp_dir: Path
    workers: list[str] = field(default_factory=list)  # the custom resource naming each worker

    def settings(self, home: Path, **ray: Any) -> Settings:
        """Settings of a control plane whose backend is this cluster."""
        options = RaySettings(address=self.address)
        return Settings(home=home, backend="ray", token="public-token", ray=replace(options, **ray))

    def client_env(self) -> dict[str, str]:
        """What a process needs in its environment to join the cluster as a driver."""
        return {k: v for k, v in self.env.items() if k.startswith("RAY_")}

    def add_worker(self, cpus: int = WORKER_CPUS) -> str:
        """Start one more worker node; returns the custom resource that names it."""
        (name,) = self.add_workers(1, cpus)
        return name

    def add_workers(self, count: int, cpus: int = WORKER_CPUS) -> list[str]:
        """Start ``count`` worker nodes; returns the custom resources that name them.

        One after the other: ``ray start`` gives a node a fixed 30 s to register, which nodes
        starting together on a loaded two-core machine miss (their raylets then never join).
        """
        names = []
        for _ in range(count):
            name = f"worker{len(self.workers) + 1}"
            failed = _RayStart(self, name, self._worker_args(name, cpus)).wait()
            if failed:
                raise RayStartError(failed)
            self.workers.append(name)
            names.append(name)
        return names

    def _worker_args(self, name: str, cpus: int) -> list[str]:
        resources = json.dumps({name: 1, "ml.m5.large": 1})
        return ["--address", self.address, "--num-cpus", str(cpus), "--memory",
                str(WORKER_MEMORY), "--resources", resources]  # fmt: skip

    def node_ids(self) -> dict[str, str]:
        """The node id of each live worker, by the custom resource that names it."""
        code = "print(json.dumps({n['NodeID']: sorted(n['Resources']) for n in alive}))"
        done = _driver(self, code)
        if done.returncode != 0:
            raise RayStartError(f"cannot list the cluster's nodes: {done.stderr[-500:]}")
        # Ray may print its own warnings to stdout under load ("raylet has lagging heartbeats").
        ours = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not ours:
            raise RayStartError(f"cannot list the cluster's nodes: {done.stdout[-500:]}")
        nodes: dict[str, list[str]] = json.loads(ours[-1])
        return {w: node for node, names in nodes.items() for w in names if w in self.workers}

    def raylet_running(self, worker: str) -> bool:
        """Whether the raylet of ``worker`` is still running."""
        return any(_is_raylet_of(p, worker) for p in self._processes())

    def kill_node(self, worker: str) -> None:
        """SIGKILL the raylet of ``worker`` and the Ray processes under it (a dead machine)."""
        raylets = [p for p in self._processes() if _is_raylet_of(p, worker)]
        if not raylets:
            raise RayStartError(f"no raylet of {worker} is running")
        victims: list[psutil.Process] = []
        for raylet in raylets:
            with contextlib.suppress(psutil.Error):
                victims += [raylet, *raylet.children(recursive=True)]
        for victim in victims:
            with contextlib.suppress(psutil.Error):
                victim.kill()
        psutil.wait_procs(victims, timeout=10)

    def stop(self) -> None:
        """Kill every process of the cluster (and what they started) and remove its files."""
        for _ in range(3):
            found = self._processes()
            if not found:
                break
            for proc in found:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            psutil.wait_procs(found, timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _processes(self) -> list[psutil.Process]:
        """The cluster's processes: every one whose environment holds its marker.

        Read from ``/proc/PID/environ`` as bytes: Ray's agents rewrite their process title over
        that area, after which psutil's parser sees an empty environment (or none of it is left,
        and the open files say whose the process is).
        """
        found = []
        needle = f"{MARKER}={self.marker}".encode()
        # This process (a driver of the cluster: its logs are in the cluster's folder) and its
        # ancestors are never the cluster's to kill.
        spared = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
        for proc in psutil.process_iter():
            if proc.pid in spared:
                continue
            with contextlib.suppress(OSError, psutil.Error):
                if needle in Path(f"/proc/{proc.pid}/environ").read_bytes() or self._holds(proc):
                    found.append(proc)
        return found

    def _holds(self, proc: psutil.Process) -> bool:
        """Whether ``proc`` has a file of the cluster's temporary folder open (Ray's agents
        overwrite their whole environment with their title, marker and all)."""
        folder = str(self.temp_dir) + "/"
        for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).startswith(folder):
                    return True
        return False


def start_ray_cluster(workdir: Path, workers: int = 2) -> RayCluster:
    """A head and ``workers`` worker nodes on 127.0.0.1; raises :class:`RayStartError`."""
    marker = secrets.token_hex(8)
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TRAINOPS_"))},
        MARKER: marker,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": _TOKEN,
        "RAY_USAGE_STATS_ENABLED": "0",
        **HEALTH_CHECKS,
    }
    # Ray's unix sockets live under its temp dir, and a socket path has at most 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    cluster = RayCluster(f"127.0.0.1:{port}", env, workdir, marker, temp_dir)
    head = ["--head", "--port", str(port), "--num-cpus", "0", "--include-dashboard", "false",
            "--no-monitor", "--ray-client-server-port", str(_free_port()),
            "--temp-dir", str(cluster.temp_dir)]  # fmt: skip
    try:
        failed = _RayStart(cluster, "head", head).wait()
        if failed:
            raise RayStartError(failed)
        cluster.add_workers(workers)
        _wait_for_nodes(cluster, workers + 1)
    except BaseException:
        cluster.stop()
        raise
    return cluster


class _RayStart:
    """One ``ray start`` running, its output in the cluster's folder."""

    def __init__(self, cluster: RayCluster, name: str, args: list[str]) -> None:
        ray = Path(sys.executable).parent / "ray"
        command = [str(ray), "start", "--node-ip-address", "127.0.0.1", "--disable-usage-stats",
                   "--include-log-monitor", "false", *args]  # fmt: skip
        cluster.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log = cluster.workdir / f"ray-start-{name}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, env=cluster.env, stdout=out, stderr=subprocess.STDOUT
            )

    def wait(self, timeout: float = 120) -> str:
        """Until it ends; what went wrong ("" when it succeeded)."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = None
        if code == 0:
            return ""
        tail = self.log.read_text(errors="replace")[-2000:]
        return f"ray start of the {self.name} node failed ({code}):\n{tail}"


def _wait_for_nodes(cluster: RayCluster, count: int, timeout: float = 120) -> None:
    """Until the cluster lists ``count`` live nodes."""
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        done = _driver(cluster, "print(len(alive))")
        seen = done.stdout.strip() or done.stderr[-500:]
        if seen == str(count):
            return
        time.sleep(0.5)
    raise RayStartError(f"the cluster has not got its {count} nodes: {seen}")


def _driver(cluster: RayCluster, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh driver of the cluster, with ``alive`` its live nodes."""
    program = (
        "import json, ray\n"
        f"ray.init(address={cluster.address!r}, logging_level='ERROR', log_to_driver=False)\n"
        "alive = [n for n in ray.nodes() if n['Alive']]\n"
        f"{code}\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _is_raylet_of(proc: psutil.Process, worker: str) -> bool:
    with contextlib.suppress(psutil.Error):
        cmdline = " ".join(proc.cmdline())
        return "raylet" in proc.name() and re.search(rf"\b{worker}\b", cmdline) is not None
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
