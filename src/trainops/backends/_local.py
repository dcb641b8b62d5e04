"""The local backend: host agents are processes on this machine, in sessions of their own.

Agents are spawned with ``posix_spawn`` in a new session, so they survive the server that
started them and a server restart can adopt them. Liveness compares the process start time with
the one recorded at launch, so a reused pid is never mistaken for the agent.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import psutil

from trainops._containment import containment
from trainops._settings import Settings
from trainops.backends._base import JOURNAL_FILE, AgentHandle, Backend, ProcessRef, parse_journal
from trainops.backends._capacity import Capacity, Slots
from trainops.backends._standby import AgentForkServer, launch_message, launch_pipe
from trainops.protocol import (
    LAUNCH_FD_ENV,
    AgentEvent,
    AgentLaunch,
    HostResources,
    hand_over_assignment,
    read_agent_process,
)

__all__ = ["LocalBackend", "agent_process", "machine_cpu_ids", "machine_gpu_count"]

AGENT_OUTPUT = "agent.out"
# Variables of the server's own environment that an agent (and the script under it) must not see.
_PRIVATE_VARS = ("TRAINOPS_TOKEN", "TRAINOPS_SERVER")
# Python ignores SIGPIPE (and may ignore others) in the server; a child starts with defaults.
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM)
_START_TIME_TOLERANCE_S = 1.0
_LAUNCH_FD = 3  # where a fresh agent finds the pipe holding its launch


class LocalBackend(Backend):
    """Host agents as local processes; capacity from settings or from the machine."""

    name = "local"

    def __init__(
        self,
        settings: Settings,
        *,
        agent_command: Sequence[str] | None = None,
        standby: bool | None = None,
    ) -> None:
        super().__init__(settings, agent_command=agent_command)
        # A fork server only makes sense for the real agent (it speaks the standby handshake).
        self._use_standby = agent_command is None if standby is None else standby
        self._real_agent = agent_command is None  # it reads a launch handed on a pipe
        self._forks: AgentForkServer | None = None
        self._forks_lock = threading.Lock()

    def open(self) -> None:
        self._start_fork_server()
        # Asked now, beside the fork server's start, so that the first submission's note
        # (Backend.containment_note) does not wait for the probe's interpreter.
        threading.Thread(target=containment, name="trainops-containment", daemon=True).start()

    def close(self) -> None:
        with self._forks_lock:
            forks, self._forks = self._forks, None
        if forks is not None:
            forks.retire()

    @cached_property
    def cpu_ids(self) -> list[int]:
        return machine_cpu_ids()

    @cached_property
    def gpu_count(self) -> int:
        # Asked once: `nvidia-smi` takes tens of milliseconds, and /info (every submission
        # without an output_path) reports the capacity.
        return machine_gpu_count()

    def capacity(self) -> Capacity:
        configured = self.settings.capacity
        memory = psutil.virtual_memory().total // (1024 * 1024)
        return Capacity(
            cpus=configured.cpus if configured.cpus is not None else len(self.cpu_ids),
            memory_mb=configured.memory_mb if configured.memory_mb is not None else int(memory),
            gpus=configured.gpus if configured.gpus is not None else self.gpu_count,
        )

    def resources_for(self, slots: Slots) -> HostResources:
        # More CPU slots than CPUs (a configured capacity above the machine's) wrap around.
        cpus = sorted({self.cpu_ids[s % len(self.cpu_ids)] for s in slots.cpus})
        return HostResources(cpus=cpus, gpus=list(slots.gpus), memory_mb=slots.memory_mb)

    def launch(
        self, launch: AgentLaunch, resources: HostResources, env: Mapping[str, str]
    ) -> AgentHandle:
        for leftover in (launch.root, launch.state_dir):
            if leftover.exists():  # left by a launch that a crash cut short: start fresh
                shutil.rmtree(leftover)
        launch.state_dir.mkdir(mode=0o700, parents=True)  # the agent's journal and output
        hand_over_assignment(launch)  # read there: the agent need not ask the agent API
        output = launch.state_dir / AGENT_OUTPUT
        own_env = {**env, **launch.env()}
        pid = self._launch_forked(own_env, output)
        if pid is None:
            pid = self._spawn_fresh(own_env, output)
            self._start_fork_server()  # the fork server is gone: the next launch gets a new one
        return AgentHandle({"pid": pid, "create_time": _create_time(pid), "node": self.node_name})

    def _base_env(self) -> dict[str, str]:
        """What every agent inherits: our environment minus the server's secrets, plus S3 access."""
        child_env = {k: v for k, v in os.environ.items() if k not in _PRIVATE_VARS}
        child_env.update(self.settings.s3.client_env())
        child_env["TRAINOPS_HOME"] = str(self.settings.home)
        return child_env

    def _spawn_fresh(self, own_env: Mapping[str, str], output: Path) -> int:
        """An agent in a process of its own. The real agent reads its launch variables (its
        token among them) from a pipe on fd 3, so they are not in its /proc environ; another
        agent command gets them in its environment."""
        launch = -1
        if self._real_agent:
            with contextlib.suppress(OSError):  # too large for a pipe: the environment then
                launch = launch_pipe(launch_message(own_env, output))
        if launch < 0:
            return self._spawn({**self._base_env(), **own_env}, output)
        try:
            # Above the descriptors the spawn sets up (and never 3 itself: a dup2 onto itself
            # would leave it close-on-exec).
            moved = fcntl.fcntl(launch, fcntl.F_DUPFD_CLOEXEC, 10)
        finally:
            os.close(launch)
        try:
            env = {**self._base_env(), LAUNCH_FD_ENV: str(_LAUNCH_FD)}
            return self._spawn(env, output, [(os.POSIX_SPAWN_DUP2, moved, _LAUNCH_FD)])
        finally:
            os.close(moved)

    def _spawn(
        self, child_env: Mapping[str, str], output: Path, more: Sequence[tuple[Any, ...]] = ()
    ) -> int:
        return os.posix_spawnp(
            self.agent_command[0],
            self.agent_command,
            dict(child_env),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (
                    os.POSIX_SPAWN_OPEN,
                    1,
                    str(output),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                    0o600,
                ),
                (os.POSIX_SPAWN_DUP2, 1, 2),
                *more,
            ],
            setsid=True,
            setsigdef=_DEFAULT_SIGNALS,
        )

    def _launch_forked(self, own_env: Mapping[str, str], output: Path) -> int | None:
        with self._forks_lock:
            forks = self._forks
        return None if forks is None else forks.launch(own_env, output)

    def _start_fork_server(self) -> None:
        if not self._use_standby:
            return
        with self._forks_lock:
            if self._forks is not None and self._forks.alive():
                return
            old, self._forks = self._forks, None
            if old is not None:
                old.retire()
            with contextlib.suppress(OSError):  # launches fall back to fresh processes
                self._forks = AgentForkServer(self.agent_command, self._base_env())

    def node_of(self, handle: AgentHandle) -> str | None:
        node = handle.data.get("node")
        return node if isinstance(node, str) else self.node_name  # every agent runs here

    def is_alive(self, handle: AgentHandle) -> bool:
        return _running(*agent_process(handle)) is not None

    def find_agent(self, state_dir: Path) -> AgentHandle | None:
        """The agent says which process it is in its state directory, first thing."""
        recorded = read_agent_process(state_dir)
        if recorded is None:
            return None
        pid, created = recorded
        if pid in (os.getpid(), os.getpgrp()):  # never this server, whatever the file says
            return None
        return AgentHandle({"pid": pid, "create_time": created, "node": self.node_name})

    def signal(self, handle: AgentHandle, signum: int) -> None:
        pid, created = agent_process(handle)
        if _running(pid, created) is not None and pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)

    def kill(self, handle: AgentHandle) -> None:
        victims: list[psutil.Process] = []
        agent = _running(*agent_process(handle))
        if agent is not None:
            with contextlib.suppress(psutil.Error):
                victims = [agent, *agent.children(recursive=True)]
            self.signal(handle, signal.SIGKILL)
        for ref in handle.workloads:
            workload = _running(ref.pid, ref.create_time)
            if workload is not None:
                victims.append(workload)
                _kill_group(ref)
        for proc in victims:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        # Waiting also reaps the ones that are our children.
        psutil.wait_procs(victims, timeout=5)

    def workload_ref(self, pid: int, pgid: int) -> ProcessRef | None:
        created = _create_time(pid)
        return None if created is None else ProcessRef(pid=pid, pgid=pgid, create_time=created)

    def agent_output(self, state_dir: Path, max_chars: int = 2000) -> str:
        try:
            with (state_dir / AGENT_OUTPUT).open("rb") as out:
                out.seek(0, os.SEEK_END)
                out.seek(max(0, out.tell() - max_chars))
                return out.read().decode("utf-8", errors="replace").strip()
        except FileNotFoundError:
            return ""

    def read_journal(self, state_dir: Path) -> list[AgentEvent]:
        try:
            text = (state_dir / JOURNAL_FILE).read_text("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        return parse_journal(text)


def agent_process(handle: AgentHandle) -> tuple[int | None, float | None]:
    """The pid and create time a local handle holds (``None`` for what it lacks)."""
    pid, created = handle.data.get("pid"), handle.data.get("create_time")
    return (
        pid if isinstance(pid, int) else None,
        float(created) if isinstance(created, int | float) else None,
    )


def _running(pid: int | None, create_time: float | None) -> psutil.Process | None:
    """The process ``pid`` if it is still the one started at ``create_time`` and not a zombie."""
    if pid is None or create_time is None:
        return None
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > _START_TIME_TOLERANCE_S:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            _reap(pid)
            return None
    except psutil.Error:
        return None
    return proc


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _kill_group(ref: ProcessRef) -> None:
    if ref.pgid > 1 and ref.pgid != os.getpgrp():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(ref.pgid, signal.SIGKILL)


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def machine_cpu_ids() -> list[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def machine_gpu_count() -> int:
    """NVIDIA GPUs listed by ``nvidia-smi --list-gpus``; 0 without the tool or a driver."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return 0
    try:
        out = subprocess.run(
            [tool, "--list-gpus"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
