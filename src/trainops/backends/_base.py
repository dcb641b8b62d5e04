"""The backend contract: where host agents run, how much room there is, and how to end them.

The control plane reserves capacity for all hosts of a job at once (:meth:`Backend.reserve`),
launches one agent per host, asks whether each is still alive, signals or kills it, and after a
restart reads what a finished agent wrote to its journal. Every backend starts the same agent
program with the same :class:`~trainops.protocol.AgentLaunch` variables.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trainops._containment import containment
from trainops._settings import Settings
from trainops.backends._capacity import Allocator, Capacity, Slots
from trainops.catalog import InstanceType
from trainops.protocol import AgentEvent, AgentLaunch, HostResources, agent_command

__all__ = [
    "JOURNAL_FILE",
    "AgentHandle",
    "Backend",
    "HostPlacement",
    "NodeInfo",
    "Preemption",
    "ProcessRef",
    "parse_journal",
]

JOURNAL_FILE = "journal.jsonl"


@dataclass(frozen=True, slots=True)
class ProcessRef:
    """A process a host runs; ``create_time`` tells it apart from a later one with its pid."""

    pid: int
    pgid: int
    create_time: float


@dataclass(frozen=True, slots=True)
class AgentHandle:
    """How to find a launched agent again, also from another control-plane process.

    ``data`` is the backend's own, opaque to everyone else and plain JSON (the store keeps it
    with the host, so a restarted control plane can still reach the agent); ``workloads`` are
    the processes the agent reported starting, to be ended with it where the backend can reach
    them. An empty ``data`` names no agent: it is never alive.
    """

    data: Mapping[str, Any] = field(default_factory=dict)
    workloads: tuple[ProcessRef, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One machine of a backend as it sees it: its name, what it has and what is free."""

    name: str
    capacity: Capacity
    free: Capacity


@dataclass(frozen=True, slots=True)
class Preemption:
    """A machine the backend is losing (a spot reclaim, a drain for preemption, a lost node).

    ``node``: its name as :meth:`Backend.node_of` gives it; ``reason``: why, for the job's
    messages (no secrets); ``deadline``: when it goes (Unix seconds), ``None`` if already gone.
    The control plane interrupts every spot job with a host on it, with the time left as notice.
    """

    node: str
    reason: str
    deadline: float | None


@dataclass(frozen=True, slots=True)
class HostPlacement:
    """Where one host of a job goes: what its agent is told, and the backend's own record."""

    resources: HostResources
    reservation: dict[str, Any]


class Backend(ABC):
    """A place to run host agents. Implementations are registered in ``BACKENDS``."""

    name: ClassVar[str]
    # Whether a job's hosts may run on other machines than the control plane's: then only object
    # storage every machine reaches (s3://, or file:// under Settings.shared_paths) will do.
    spans_machines: ClassVar[bool] = False
    # Whether a job that does not fit means no later job of the same instance type and host count
    # fits either, until capacity frees: the scheduler then tries one waiting job per such need.
    # False where every waiting job must be asked about on each pass (Ray: each job's pending
    # placement group is what the cluster, and its autoscaler, sees of the demand).
    fits_by_need: ClassVar[bool] = True

    def __init__(self, settings: Settings, *, agent_command: Sequence[str] | None = None) -> None:
        self.settings = settings
        self.agent_command = list(agent_command) if agent_command else _default_command()
        self._allocator: Allocator | None = None

    def open(self) -> None:  # noqa: B027 (an optional hook: most backends keep nothing warm)
        """Prepare what the backend keeps for itself (warm spares); called when the plane starts.

        Backends without such state have nothing to prepare.
        """

    def close(self) -> None:  # noqa: B027 (the optional hook's counterpart)
        """Release what ``open`` prepared. Agents are not touched: they outlive the plane."""

    @abstractmethod
    def capacity(self) -> Capacity:
        """Everything this backend may hand out."""

    @abstractmethod
    def launch(
        self, launch: AgentLaunch, resources: HostResources, env: Mapping[str, str]
    ) -> AgentHandle:
        """Start one host agent with ``launch.env()`` and ``env``; it must outlive the caller."""

    @abstractmethod
    def is_alive(self, handle: AgentHandle) -> bool:
        """Whether the agent process of ``handle`` (not a later one with its pid) still runs."""

    def find_agent(self, state_dir: Path) -> AgentHandle | None:
        """The handle of the agent launched for ``state_dir`` whose launch was never recorded
        (the control plane stopped between starting it and storing its handle); ``None`` while
        none is known there. Default: none is ever found, so such a host is lost once its
        heartbeat timeout passes (its agent, if it runs, is then refused and stops)."""
        return None

    @abstractmethod
    def signal(self, handle: AgentHandle, signum: int) -> None:
        """Send ``signum`` to the agent's process group, if it still runs."""

    @abstractmethod
    def kill(self, handle: AgentHandle) -> None:
        """SIGKILL the agent, everything it started, and the workloads in ``handle``; then reap."""

    @abstractmethod
    def workload_ref(self, pid: int, pgid: int) -> ProcessRef | None:
        """Identify a process an agent reported starting (``None`` if it has already ended)."""

    @abstractmethod
    def read_journal(self, state_dir: Path) -> list[AgentEvent]:
        """Every event the agent wrote to its journal (a torn last line is skipped)."""

    @abstractmethod
    def agent_output(self, state_dir: Path, max_chars: int = 2000) -> str:
        """The end of what the agent wrote to its stdout/stderr (for a lost agent's reason)."""

    def job_trees(self) -> list[str]:
        """Names of the jobs that have host trees where this backend's agents run.

        The base class's agents run on this machine, under ``$TRAINOPS_HOME/jobs/``; a backend
        whose agents run elsewhere lists (and removes) the trees on its own machines.
        """
        try:
            return sorted(e.name for e in self.settings.jobs_dir.iterdir() if e.is_dir())
        except FileNotFoundError:
            return []

    def remove_job_tree(self, job: str) -> bool:
        """Delete every host tree and agent state of ``job``; whether none is left."""
        tree = self.settings.jobs_dir / job
        shutil.rmtree(tree, ignore_errors=True)
        return not tree.exists()

    def containment_note(self, mount_opt_ml: bool) -> str | None:
        """One line saying what a job's hosts cannot have where this backend runs them (private
        namespaces; the tree at /opt/ml when ``mount_opt_ml``) and why, else ``None``.

        The base class's agents run on this machine, so this machine is asked (once); a backend
        whose agents run elsewhere asks its machines.
        """
        return containment().note(mount_opt_ml)

    def gone_reason(self, handle: AgentHandle) -> str | None:
        """Why an agent that :meth:`is_alive` found gone is gone, where the backend knows more
        than that it ended (an engine's word on a lost node); ``None`` otherwise."""
        return None

    def host_address(self, reservation: Mapping[str, Any]) -> str | None:
        """The network address of the machine a host was placed on (from its reservation), for
        the job's host names to resolve to; ``None``: hosts share this machine, and each gets a
        loopback address of its own (see ``agent/supervision/_hostns.py``)."""
        return None

    def node_of(self, handle: AgentHandle) -> str | None:
        """The machine an agent runs on (shown per host by ``describe``); ``None`` if unknown."""
        return None

    def nodes(self) -> list[NodeInfo]:
        """The machines agents may run on, with what each has and what is free of it."""
        return [NodeInfo(self.node_name, self.capacity(), self.free())]

    @property
    def node_name(self) -> str:
        """This machine's name: the one node of a backend that runs agents where it is."""
        return socket.gethostname()

    def terminate(self, handle: AgentHandle) -> None:
        self.signal(handle, signal.SIGTERM)

    def take_preemptions(self) -> list[Preemption]:
        """The machines found going since the last call, each reported once (polled on every
        monitor tick; it must not block). Default: none (a backend that cannot lose machines)."""
        return []

    # Capacity accounting is the same for every backend that knows its own capacity.

    @property
    def allocator(self) -> Allocator:
        if self._allocator is None:
            self._allocator = Allocator(self.capacity())
        return self._allocator

    def free(self) -> Capacity:
        return self.allocator.free()

    def reserve(self, job: str, instance: InstanceType, count: int) -> list[HostPlacement]:
        """Room for all ``count`` hosts of ``job`` or ``CapacityShortage`` (nothing reserved)."""
        slots = self.allocator.reserve(job, instance, count)
        return [HostPlacement(self.resources_for(s), s.to_json()) for s in slots]

    def adopt(self, job: str, reservations: Sequence[Mapping[str, Any]]) -> None:
        """Hold again what ``job`` held before a restart (``HostPlacement.reservation`` values)."""
        self.allocator.adopt(job, [Slots.from_json(dict(r)) for r in reservations])

    def release(self, job: str) -> None:
        self.allocator.release(job)

    def resources_for(self, slots: Slots) -> HostResources:
        """What the agent is told about its slots; backends map slots to real device ids."""
        return HostResources(
            cpus=list(slots.cpus), gpus=list(slots.gpus), memory_mb=slots.memory_mb
        )


def _default_command() -> list[str]:
    return agent_command()


def parse_journal(text: str) -> list[AgentEvent]:
    """Events of a journal (one ``AgentEvent.to_json()`` per line); unreadable lines are skipped.

    Only the last line can be torn (the agent died while appending it); such an event was never
    sent either, so skipping it loses nothing the agent reported.
    """
    events = []
    for line in text.splitlines():
        try:
            events.append(AgentEvent.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    return events
