"""What the Ray backend runs on a node: one actor per host, which starts and watches its agent.

The actor is a detached, named Ray actor scheduled into its host's bundle of the job's placement
group, so Ray has reserved the host's CPUs, GPUs and memory on that node before it starts. It
starts the same agent program every backend starts (``python -m trainops.agent`` with the
node's own interpreter) as a child process in a session of its own, and from then on answers
for it: whether it still runs (``wait`` returns when it exits), signals, kill, and what it left
in its state directory (the journal a restarted control plane reads back, its output).

The agent is told the actor's pid (``TRAINOPS_AGENT_PARENT``): when the actor dies (its node was
lost, its raylet killed), the agent abandons its host at once, so nothing of a written-off host
goes on running. This module imports only the standard library and psutil; Ray itself is
imported where it is needed, on the node.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil

from trainops.protocol import PARENT_ENV

__all__ = ["AGENT_OUTPUT", "HostActor", "list_job_trees", "probe_containment", "remove_job_tree"]

AGENT_OUTPUT = "agent.out"
# Ray's own variables stay with the worker: a training script must not find (and join) the
# cluster trainops runs it on, nor inherit a worker's settings.
_RAY_PREFIXES = ("RAY_", "RAYLET_")
_KILL_WAIT_S = 10.0


class HostActor:
    """The agent of one host, on the node Ray placed the host's bundle."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._started: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def start(
        self,
        argv: list[str] | None,
        env: dict[str, str],
        root: str,
        state_dir: str,
    ) -> dict[str, Any]:
        """Start the agent (a fresh host tree and state directory) and say where it runs."""
        import ray

        from trainops.agent.supervision._nodump import forbid_memory_reads

        # This worker holds the host's agent token (in ``env``), as the agent does: no process
        # of the same user (a job's script on this node) may read its memory.
        forbid_memory_reads()

        for leftover in (Path(root), Path(state_dir)):
            if leftover.exists():  # left by a launch that a crash cut short: start fresh
                shutil.rmtree(leftover)
        Path(state_dir).mkdir(mode=0o700, parents=True)
        command = argv or [sys.executable, "-m", "trainops.agent"]
        own_env = {k: v for k, v in os.environ.items() if not k.startswith(_RAY_PREFIXES)}
        own_env.update(env)
        gpus = [str(g) for g in ray.get_gpu_ids()]
        if gpus:  # the GPUs Ray gave this host's bundle, as the agent's own ids
            own_env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        own_env[PARENT_ENV] = str(os.getpid())
        with (Path(state_dir) / AGENT_OUTPUT).open("ab") as output, self._lock:
            self._proc = subprocess.Popen(
                command,
                env=own_env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        context = ray.get_runtime_context()
        self._started = {
            "pid": self._proc.pid,
            "create_time": psutil.Process(self._proc.pid).create_time(),
            "node": context.get_node_id(),
            "address": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
        }
        return self._started

    def started(self) -> dict[str, Any] | None:
        """What :meth:`start` answered (``None`` before it has): asked by a control plane that
        stopped before that answer reached it."""
        return self._started

    def wait(self) -> int | None:
        """Return once the agent has exited, with its exit status (``None``: never started)."""
        proc = self._proc
        return None if proc is None else proc.wait()

    def running(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the agent's process group, if it still runs."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signum)

    def kill(self, workloads: list[list[int]]) -> None:
        """SIGKILL the agent, everything it started, and the reported workloads (pid, pgid)."""
        victims: list[psutil.Process] = []
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                agent = psutil.Process(proc.pid)
                victims = [agent, *agent.children(recursive=True)]
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for pid, pgid in workloads:
            with contextlib.suppress(psutil.Error):
                workload = psutil.Process(pid)
                if proc is None or workload.create_time() >= psutil.Process().create_time():
                    victims.append(workload)  # started after this actor: not a reused pid
                    if pgid > 1 and pgid != os.getpgrp():
                        os.killpg(pgid, signal.SIGKILL)
        for victim in victims:
            with contextlib.suppress(psutil.Error):
                victim.kill()
        psutil.wait_procs(victims, timeout=_KILL_WAIT_S)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(_KILL_WAIT_S)

    def read_text(self, path: str, max_chars: int | None = None) -> str:
        """A file of the agent's state directory ('' when it is not there); with ``max_chars``,
        only its end."""
        try:
            with Path(path).open("rb") as handle:
                if max_chars is not None:
                    handle.seek(0, os.SEEK_END)
                    handle.seek(max(0, handle.tell() - max_chars))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""


def list_job_trees(jobs_dir: str) -> list[str]:
    """The jobs with host trees under ``jobs_dir`` on this node (a Ray task's body)."""
    try:
        return sorted(entry.name for entry in Path(jobs_dir).iterdir() if entry.is_dir())
    except OSError:
        return []


def remove_job_tree(jobs_dir: str, job: str) -> bool:
    """Delete ``jobs_dir/job`` on this node; whether none of it is left (a Ray task's body)."""
    tree = Path(jobs_dir) / job
    shutil.rmtree(tree, ignore_errors=True)
    return not tree.exists()


def probe_containment() -> dict[str, Any]:
    """What this node lets a job's hosts have (namespaces, /opt/ml), as its agents find it (a
    Ray task's body)."""
    from trainops._containment import containment

    return containment().to_json()
