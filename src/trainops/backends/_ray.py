"""The Ray backend: a job's hosts on the nodes of a Ray cluster, gang-scheduled.

A job gets one placement group (detached, named ``trainops-<job>``) with one bundle per host,
reserving the instance type's CPUs, GPUs and memory, plus one unit of a custom resource named
after the instance type where any node declares one (a node declaring ``ml.g5.xlarge: 2`` holds
two such hosts). The group's strategy is ``STRICT_SPREAD`` (every host on a node of its own) or,
by setting, ``SPREAD``. Until Ray has placed the whole group the job is Pending, saying what it
waits for (never half a job); a job that no set of the cluster's nodes could ever hold fails at
once with the reason, unless the cluster autoscales (then the pending group is the demand the
autoscaler sees).

Each host's agent runs under a detached, named actor (``_ray_host.HostActor``) in the host's
bundle; the handle names that actor, so a restarted control plane finds it again. Liveness is
the agent's heartbeat (as for every backend); the actor adds a fast hint: a call to its
``wait`` that returns when the agent exits, or fails when the actor (its node) dies. Releasing
the job removes its placement group, which ends its actors too.

Ray is imported lazily (``pip install trainops[ray]``): trainops imports without it, and the
control plane connects to the cluster when it opens the backend.
"""

from __future__ import annotations

import math
import socket
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainops._containment import Containment
from trainops._errors import ConfigError
from trainops._settings import Settings
from trainops.backends._base import (
    JOURNAL_FILE,
    AgentHandle,
    Backend,
    HostPlacement,
    NodeInfo,
    Preemption,
    ProcessRef,
    parse_journal,
)
from trainops.backends._capacity import Capacity, CapacityNeverFits, CapacityShortage
from trainops.backends._ray_host import (
    AGENT_OUTPUT,
    HostActor,
    list_job_trees,
    probe_containment,
    remove_job_tree,
)
from trainops.backends._ray_nodes import NodeWatch, raylet_answers
from trainops.backends._ray_nodes import node_name as _node_name
from trainops.backends._settings import RAY_PLACEMENTS
from trainops.catalog import InstanceType
from trainops.protocol import AgentEvent, AgentLaunch, HostResources

__all__ = ["RayBackend", "bundle_for"]

_MIB = 1024 * 1024
_CALL_TIMEOUT_S = 60.0
_START_TIMEOUT_S = 300.0  # a node may have to start a worker process (or pull an image) first
_FIRST_WAIT_S = 2.0
_PROBE_TIMEOUT_S = 5.0


def bundle_for(instance: InstanceType, declared: set[str]) -> dict[str, float]:
    """The Ray resources one host of ``instance`` reserves (``declared``: the custom resources
    some node of the cluster has)."""
    bundle: dict[str, float] = {"CPU": float(instance.vcpus)}
    if instance.gpus:
        bundle["GPU"] = float(instance.gpus)
    if instance.memory_gib:
        bundle["memory"] = float(int(instance.memory_gib * 1024) * _MIB)
    if instance.name in declared:
        bundle[instance.name] = 1.0
    return bundle


class RayBackend(Backend):
    """Host agents as Ray actors, one placement group per job."""

    name = "ray"
    spans_machines = True
    fits_by_need = False

    def __init__(self, settings: Settings, *, agent_command: Sequence[str] | None = None) -> None:
        super().__init__(settings, agent_command=agent_command)
        self._custom_command = agent_command is not None
        self._lock = threading.Lock()
        self._waits: dict[str, Any] = {}  # actor name -> the ObjectRef of its `wait` call
        self._gone: dict[str, str] = {}  # actor name -> why it died, as Ray said
        self._containment: dict[str, Containment] = {}  # node id -> what it allows
        self._nodes = NodeWatch()  # nodes drained for preemption or lost, reported once

    # Connecting ------------------------------------------------------------------------

    def open(self) -> None:
        # Checked even where this process has joined a cluster already (one Ray connection per
        # process): a control plane must not start on settings that name no reachable cluster.
        _probe(self._address())
        self._ray()

    def close(self) -> None:
        with self._lock:
            self._waits.clear()

    def _ray(self) -> Any:
        """The ``ray`` module, connected to the cluster of ``settings.ray``."""
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "backend 'ray' needs Ray on this machine: pip install 'trainops[ray]'"
            ) from None
        if not ray.is_initialized():
            with self._lock:
                if not ray.is_initialized():
                    self._connect(ray)
        return ray

    def _address(self) -> str:
        address = self.settings.ray.address
        if not address:
            raise ConfigError(
                "backend 'ray' needs the cluster's address: ray.address in config.yaml, "
                "TRAINOPS_RAY_ADDRESS, or trainops server --ray-address (HOST:PORT or auto)"
            )
        return address

    def _connect(self, ray: Any) -> None:
        address = self._address()
        _probe(address)
        try:
            ray.init(
                address=address,
                namespace=self.settings.ray.namespace,
                logging_level="ERROR",
                log_to_driver=False,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot reach the Ray cluster at {address!r}: {exc}") from None

    # Capacity --------------------------------------------------------------------------

    def _alive_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self._ray().nodes() if n.get("Alive")]

    def capacity(self) -> Capacity:
        total = _sum_resources(n.get("Resources", {}) for n in self._alive_nodes())
        return _capacity(total)

    def free(self) -> Capacity:
        return _capacity(self._ray().available_resources())

    def nodes(self) -> list[NodeInfo]:
        available = _available_per_node(self._ray())
        return [
            NodeInfo(
                _node_name(node),
                _capacity(node.get("Resources", {})),
                _capacity(available.get(node["NodeID"], node.get("Resources", {}))),
            )
            for node in self._alive_nodes()
        ]

    def reserve(self, job: str, instance: InstanceType, count: int) -> list[HostPlacement]:
        ray = self._ray()
        from ray.util.placement_group import placement_group, placement_group_table

        nodes = self._alive_nodes()
        declared = {name for n in nodes for name in n.get("Resources", {})}
        bundle = bundle_for(instance, declared)
        strategy = RAY_PLACEMENTS[self.settings.ray.placement]
        group, wait = self._group(job), 0.0
        if group is None:
            self._check_feasible(instance, count, bundle, strategy, nodes)
            group = placement_group(
                [dict(bundle) for _ in range(count)],
                strategy=strategy,
                name=_group_name(job),
                lifetime="detached",
            )
            wait = _FIRST_WAIT_S  # Ray places a group that fits within milliseconds
        if not group.wait(timeout_seconds=wait):
            raise CapacityShortage(_waiting_for(count, bundle, strategy))
        placed = placement_group_table(group).get("bundles_to_node_id", {})
        addresses = {n["NodeID"]: n.get("NodeManagerAddress") for n in ray.nodes()}
        # CPU and GPU ids are the node's business (Ray hands the actor its GPUs): the agent is
        # told how many.
        resources = HostResources(
            memory_mb=int(bundle.get("memory", 0)) // _MIB,
            cpu_count=instance.vcpus,
            gpu_count=instance.gpus,
        )
        return [
            HostPlacement(
                resources,
                {
                    "placement_group": _group_name(job),
                    "bundle": index,
                    "node": placed.get(index),
                    "address": addresses.get(placed.get(index)),
                    "cpus": instance.vcpus,
                    "gpus": instance.gpus,
                },
            )
            for index in range(count)
        ]

    def _group(self, job: str) -> Any:
        ray = self._ray()
        try:
            return ray.util.get_placement_group(_group_name(job))
        except ValueError:  # no such group
            return None

    def _check_feasible(
        self,
        instance: InstanceType,
        count: int,
        bundle: Mapping[str, float],
        strategy: str,
        nodes: list[dict[str, Any]],
    ) -> None:
        if self.settings.ray.autoscaling:
            return  # the pending group is the demand the autoscaler sees
        per_node = [_fits(bundle, n.get("Resources", {})) for n in nodes]
        holds = sum(1 for f in per_node if f) if strategy == "STRICT_SPREAD" else sum(per_node)
        if holds >= count:
            return
        wanted = _describe(bundle)
        if not any(per_node):
            raise CapacityNeverFits(
                f"no node of the Ray cluster can hold a host of {instance.name} ({wanted}); "
                f"its nodes have {_largest(nodes)}"
            )
        raise CapacityNeverFits(
            f"the Ray cluster can hold at most {holds} of the {count} hosts of {instance.name} "
            f"({wanted} each{' on nodes of their own' if strategy == 'STRICT_SPREAD' else ''})"
        )

    def adopt(self, job: str, reservations: Sequence[Mapping[str, Any]]) -> None:
        """Nothing to hold again: the job's placement group outlived the control plane."""

    def release(self, job: str) -> None:
        group = self._group(job)
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)  # ends the actors placed in it too

    def host_address(self, reservation: Mapping[str, Any]) -> str | None:
        address = reservation.get("address")
        return address if isinstance(address, str) and address else None

    # Agents ----------------------------------------------------------------------------

    def launch(
        self, launch: AgentLaunch, resources: HostResources, env: Mapping[str, str]
    ) -> AgentHandle:
        ray = self._ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        group = self._group(launch.job_name)
        if group is None:
            raise OSError(f"job {launch.job_name} has no placement group (was it released?)")
        index = _host_index(launch.host)
        bundle = group.bundle_specs[index]
        name = _actor_name(launch)
        actor_class = ray.remote(HostActor)
        actor = actor_class.options(
            name=name,
            namespace=self.settings.ray.namespace,
            lifetime="detached",
            max_concurrency=8,  # `wait` blocks one thread; signals and kills use others
            num_cpus=bundle.get("CPU", 0),
            num_gpus=bundle.get("GPU", 0),
            memory=bundle.get("memory"),
            resources={k: v for k, v in bundle.items() if k not in ("CPU", "GPU", "memory")},
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=index
            ),
        ).remote()
        own_env = {**self._agent_env(), **env, **launch.env()}
        argv = list(self.agent_command) if self._custom_command else None
        try:
            started = ray.get(
                actor.start.remote(argv, own_env, str(launch.root), str(launch.state_dir)),
                timeout=_START_TIMEOUT_S,
            )
        except Exception as exc:
            ray.kill(actor, no_restart=True)
            message = f"could not start the agent of {launch.host} on Ray: {_cause(exc)}"
            raise OSError(message) from None
        with self._lock:
            self._waits[name] = actor.wait.remote()
        return AgentHandle({"actor": name, **started})

    def find_agent(self, state_dir: Path) -> AgentHandle | None:
        """The host's actor is named after its state directory; it answers what it started."""
        name = _actor_name_of_state(state_dir)
        actor = self._actor(name)
        if actor is None:
            return None
        started = self._call(actor.started.remote())
        return AgentHandle({"actor": name, **started}) if isinstance(started, dict) else None

    def _agent_env(self) -> dict[str, str]:
        """What every agent gets besides its launch variables: S3 access and its home."""
        env = dict(self.settings.s3.client_env())
        env["TRAINOPS_HOME"] = str(self.settings.home)
        return env

    def node_of(self, handle: AgentHandle) -> str | None:
        node = handle.data.get("node")
        if not isinstance(node, str):
            return None
        return _node_name({"NodeID": node, "NodeManagerAddress": handle.data.get("address", "?")})

    def is_alive(self, handle: AgentHandle) -> bool:
        name = handle.data.get("actor")
        if not isinstance(name, str):
            return False
        ray = self._ray()
        with self._lock:
            waiting = self._waits.get(name)
        if waiting is None:
            actor = self._actor(name)
            if actor is None:  # gone; with its node, where the plane restarted since
                return self._on_lost_node(handle)
            waiting = actor.wait.remote()
            with self._lock:
                self._waits[name] = waiting
        ready, _ = ray.wait([waiting], timeout=0)
        if not ready:
            return True
        try:
            ray.get(waiting, timeout=_CALL_TIMEOUT_S)  # the agent's exit status: it ended
        except Exception as exc:  # the actor died (its node was lost, or it was killed)
            with self._lock:
                self._gone[name] = _death(exc, handle)
            if self._on_lost_node(handle):
                return True  # until the control plane has heard of the node (NodeWatch.holding)
        with self._lock:
            self._waits.pop(name, None)
        return False

    def _on_lost_node(self, handle: AgentHandle) -> bool:
        """Whether the failed (or vanished) actor of ``handle`` ran on a node now found lost and
        not yet reported as such; the node is then reported at the next ``take_preemptions``."""
        node_id = handle.data.get("node")
        if not isinstance(node_id, str):
            return False
        if not self._nodes.known(node_id):
            node = next((n for n in self._ray().nodes() if n["NodeID"] == node_id), None)
            if node is not None and (node.get("Alive") and raylet_answers(node)):
                return False  # the actor died alone (its process crashed, or was killed)
            if node is not None and not node.get("Alive"):
                self._nodes.dead(node)  # written off by Ray already
            else:
                where = node or {
                    "NodeID": node_id,
                    "NodeManagerAddress": handle.data.get("address"),
                }
                self._nodes.lost(where, "its raylet does not answer, and the host's actor failed")
        return self._nodes.holding(node_id)

    def take_preemptions(self) -> list[Preemption]:
        """Nodes the GCS drains (with their deadline), lists dead, or that were found lost
        since the last call (see ``_ray_nodes``)."""
        ray = self._ray()
        return self._nodes.poll(_draining_nodes(), ray.nodes())

    def gone_reason(self, handle: AgentHandle) -> str | None:
        name = handle.data.get("actor")
        with self._lock:
            return self._gone.get(name) if isinstance(name, str) else None

    def signal(self, handle: AgentHandle, signum: int) -> None:
        actor = self._actor_of(handle)
        if actor is not None:
            self._call(actor.signal.remote(int(signum)))

    def kill(self, handle: AgentHandle) -> None:
        actor = self._actor_of(handle)
        if actor is None:
            return
        with self._lock:
            dead = handle.data.get("actor") in self._gone
        if not dead:  # a call to a dead actor fails only after Ray's retries (~2 s)
            workloads = [[ref.pid, ref.pgid] for ref in handle.workloads]
            self._call(actor.kill.remote(workloads))
        # A dead actor's agent has already ended its host (it watches the actor's pid).
        self._ray().kill(actor, no_restart=True)

    def workload_ref(self, pid: int, pgid: int) -> ProcessRef | None:
        # The process runs on the agent's node, out of this machine's sight: the actor checks
        # it there (started after the actor, so not a reused pid) when it kills.
        return ProcessRef(pid=pid, pgid=pgid, create_time=0.0)

    def read_journal(self, state_dir: Path) -> list[AgentEvent]:
        return parse_journal(self._read(state_dir, JOURNAL_FILE, None))

    def agent_output(self, state_dir: Path, max_chars: int = 2000) -> str:
        return self._read(state_dir, AGENT_OUTPUT, max_chars).strip()

    def _read(self, state_dir: Path, file: str, max_chars: int | None) -> str:
        """A file of an agent's state directory, read by the actor of its host (the node that
        has it); '' where that actor is gone with its node."""
        actor = self._actor(_actor_name_of_state(state_dir))
        if actor is None:
            return ""
        text = self._call(actor.read_text.remote(str(state_dir / file), max_chars))
        return text if isinstance(text, str) else ""

    def _actor_of(self, handle: AgentHandle) -> Any:
        name = handle.data.get("actor")
        return self._actor(name) if isinstance(name, str) else None

    def _actor(self, name: str) -> Any:
        try:
            return self._ray().get_actor(name, namespace=self.settings.ray.namespace)
        except ValueError:  # no such actor (never was, or dead and gone)
            return None

    def _call(self, ref: Any) -> Any:
        """The result of an actor call; ``None`` where the actor died or did not answer."""
        ray = self._ray()
        try:
            return ray.get(ref, timeout=_CALL_TIMEOUT_S)
        except Exception:  # RayActorError, GetTimeoutError, …: the actor is gone or stuck
            return None

    # Trees on the nodes ----------------------------------------------------------------

    def job_trees(self) -> list[str]:
        found: set[str] = set()
        for names in self._on_every_node(list_job_trees, str(self.settings.jobs_dir)):
            found.update(names or [])
        return sorted(found)

    def remove_job_tree(self, job: str) -> bool:
        results = self._on_every_node(remove_job_tree, str(self.settings.jobs_dir), job)
        return all(r is True for r in results)

    def _on_every_node(self, function: Any, *args: Any) -> list[Any]:
        return self._on_nodes(self._alive_nodes(), function, *args)

    def _on_nodes(self, nodes: list[dict[str, Any]], function: Any, *args: Any) -> list[Any]:
        """``function(*args)`` run as a task on each of ``nodes``; ``None`` for one that did
        not answer."""
        ray = self._ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        task = ray.remote(num_cpus=0)(function)
        refs = [
            task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(*args)
            for node in nodes
        ]
        return [self._call(ref) for ref in refs]

    # What the nodes allow ----------------------------------------------------------------

    def containment_note(self, mount_opt_ml: bool) -> str | None:
        """What the nodes cannot give a job's hosts: each node is asked once, by a task on it
        that runs the probe its agents run (``trainops._containment``)."""
        found = self._node_containment()
        lacking = sorted(name for name, answer in found.items() if answer.note(mount_opt_ml))
        if not lacking:
            return None
        note = found[lacking[0]].note(mount_opt_ml)
        names = ", ".join(lacking[:3]) + (", …" if len(lacking) > 3 else "")
        return f"on {len(lacking)} of {len(found)} Ray nodes ({names}): {note}"

    def _node_containment(self) -> dict[str, Containment]:
        """Each alive node's answer by its name, asking the nodes not asked before."""
        nodes = self._alive_nodes()
        with self._lock:
            new = [node for node in nodes if node["NodeID"] not in self._containment]
        for node, answer in zip(new, self._on_nodes(new, probe_containment), strict=True):
            if isinstance(answer, dict):  # a node that did not answer is asked next time
                with self._lock:
                    self._containment[node["NodeID"]] = Containment.from_json(answer)
        with self._lock:
            return {
                _node_name(node): self._containment[node["NodeID"]]
                for node in nodes
                if node["NodeID"] in self._containment
            }


def _probe(address: str) -> None:
    """Fail at once, with the reason, where ``HOST:PORT`` does not even accept a connection
    (``ray.init`` would retry for minutes, logging as it goes)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the Ray cluster at {address!r}: {exc.strerror or exc}; is its head "
            "running (ray start --head) and is that its address and port?"
        ) from None


def _group_name(job: str) -> str:
    return f"trainops-{job}"


def _actor_name(launch: AgentLaunch) -> str:
    return _actor_name_of_state(launch.state_dir)


def _actor_name_of_state(state_dir: Path) -> str:
    """``trainops-<job>-attempt-<n>-<host>``: the state dir is ``jobs/<job>/attempt-<n>/.agents/
    <host>``, unique to one host of one attempt, and what journal reads are given."""
    host, attempt, job = state_dir.name, state_dir.parent.parent.name, state_dir.parents[2].name
    return f"trainops-{job}-{attempt}-{host}"


def _host_index(host: str) -> int:
    """``algo-3`` -> 2: host N of a job runs in bundle N - 1 of its placement group."""
    prefix, _, number = host.rpartition("-")
    if prefix != "algo" or not number.isdigit() or int(number) < 1:
        raise OSError(f"{host!r} is not a host name of the form algo-N")
    return int(number) - 1


def _death(exc: BaseException, handle: AgentHandle) -> str:
    """Ray's word on an actor's death, in one line, with the node it ran on."""
    text = " ".join(str(exc).split())
    node = handle.data.get("node")
    where = f" (node {str(node)[:12]})" if isinstance(node, str) else ""
    if "node has died" in text or "node was terminated" in text or "its node" in text:
        return f"the Ray node that ran it died{where}"
    return f"the Ray actor that held it died{where}: {text[:300]}"


def _cause(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {cause}"


def _fits(bundle: Mapping[str, float], resources: Mapping[str, float]) -> int:
    """How many ``bundle`` fit in a node of ``resources``."""
    counts = [
        math.floor(float(resources.get(name, 0.0)) / amount + 1e-9)
        for name, amount in bundle.items()
        if amount > 0
    ]
    return max(0, min(counts)) if counts else 0


def _sum_resources(items: Any) -> dict[str, float]:
    total: dict[str, float] = {}
    for resources in items:
        for name, amount in resources.items():
            total[name] = total.get(name, 0.0) + float(amount)
    return total


def _capacity(resources: Mapping[str, float]) -> Capacity:
    return Capacity(
        cpus=int(resources.get("CPU", 0)),
        memory_mb=int(resources.get("memory", 0)) // _MIB,
        gpus=int(resources.get("GPU", 0)),
    )


def _draining_nodes() -> dict[str, int]:
    """The nodes the GCS is draining, with each one's deadline in epoch ms (0: none given)."""
    try:
        from ray._private.state import state

        found: dict[str, int] = state.get_draining_nodes()
        return found
    except Exception:  # not in this version (or the GCS did not answer): nothing seen draining
        return {}


def _available_per_node(ray: Any) -> dict[str, dict[str, float]]:
    """What is free on each node, where this Ray version tells (it has no public call for it)."""
    try:
        from ray._private.state import available_resources_per_node

        found: dict[str, dict[str, float]] = available_resources_per_node()  # type: ignore[no-untyped-call]
        return found
    except Exception:  # not in this version: each node shows its total as free
        return {}


def _describe(bundle: Mapping[str, float]) -> str:
    parts = []
    for name, amount in bundle.items():
        if name == "memory":
            parts.append(f"{amount / (1024 * _MIB):g} GiB memory")
        else:
            parts.append(f"{amount:g} {name}")
    return ", ".join(parts)


def _largest(nodes: list[dict[str, Any]]) -> str:
    if not nodes:
        return "no node alive"
    keys = ("CPU", "GPU", "memory")
    best = max(nodes, key=lambda n: tuple(float(n.get("Resources", {}).get(k, 0)) for k in keys))
    return "at most " + _describe({k: float(best["Resources"].get(k, 0)) for k in keys})


def _waiting_for(count: int, bundle: Mapping[str, float], strategy: str) -> str:
    where = ", on nodes of their own" if strategy == "STRICT_SPREAD" and count > 1 else ""
    hosts = "the host" if count == 1 else f"all {count} hosts at once"
    return f"the Ray cluster has not room for {hosts} yet ({_describe(bundle)} each{where})"
