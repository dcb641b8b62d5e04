"""The processes this host starts for its job: the launch context built and its launcher asked.

Every process of the host runs in the host's own namespaces (``_hostns``), one host or many:
there ``algo-N`` names this host's loopback address and ``MASTER_ADDR`` is the first host's
name, as on SageMaker; the channels' binds and the tree at ``/opt/ml`` are mounted, and what
:class:`Isolation` names is masked. Where the machine allows no namespaces, the processes run
as they are, the master is 127.0.0.1 (every local host is this machine) and the log says what
is not protected; a job whose channels bind directories cannot start there.
"""

from __future__ import annotations

import dataclasses
import errno
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainops.agent.channels import Bind
from trainops.agent.contract._setup import ScriptCommand
from trainops.agent.launchers import (
    LaunchContext,
    LaunchError,
    RankProcess,
    RemoteShellPaths,
    job_port,
    launcher_for,
)
from trainops.agent.supervision._hostns import (
    NO_ISOLATION,
    HostNamespace,
    NamespaceError,
    hold_arguments,
    host_addresses,
    mount_arguments,
    namespaces_available,
    write_hosts_file,
)
from trainops.agent.supervision._process import Spawn
from trainops.protocol import Assignment

__all__ = [
    "LOCAL_MASTER",
    "HostLaunch",
    "Isolation",
    "hold_host_namespace",
    "host_processes",
    "rendezvous_scope",
    "start_host_namespace",
]

LOCAL_MASTER = "127.0.0.1"
NO_NAMESPACES = (
    "host names such as {host} do not resolve here: this machine allows no mount/UTS "
    "namespaces (needs root or user namespaces), so MASTER_ADDR is 127.0.0.1"
)


@dataclass(frozen=True, slots=True)
class Isolation:
    """What the host's processes must not see: ``masks`` (directories covered by an empty
    read-only tmpfs) less ``keeps`` (paths below them bound back: the host's own tree, its
    private home, its Python environment, its own remote-shell directory); and what they must
    not change: ``read_only`` (the Python installation the agents and the server run from,
    shown read-only wherever it is, under a mask too)."""

    masks: tuple[Path, ...] = ()
    keeps: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class HostLaunch:
    """What this host starts, the command to show for it, and warnings for the host log;
    ``namespace``: the host's namespaces, to close once its processes are done; ``spawn``:
    where the host runs one process, how the namespaces' holder starts it (see
    :meth:`HostNamespace.run_held`) instead of a process that joins them."""

    processes: list[RankProcess]
    command: list[str]
    warnings: list[str]
    namespace: HostNamespace | None = field(default=None)
    spawn: Spawn | None = field(default=None)


def host_processes(
    assignment: Assignment,
    command: ScriptCommand,
    env: dict[str, str],
    state_dir: Path,
    remote_shell: RemoteShellPaths | None = None,
    *,
    binds: Sequence[Bind] = (),
    opt_ml: Path | None = None,
    isolation: Isolation = Isolation(),
    namespace: HostNamespace | None = None,
) -> HostLaunch:
    """What this host runs, as the job's launcher lays it out; ``remote_shell`` is how the
    launcher may start programs on the job's other hosts; ``binds`` (the channels') and
    ``opt_ml`` (the host's tree, to show at /opt/ml) are mounted in the host's namespaces.
    Where namespaces can be made, they are made here (the caller closes the launch's
    ``namespace``), unless ``namespace`` (started earlier by the caller, with the same
    mounts, and closed by it) is given."""
    job = assignment.spec
    distributed = len(assignment.hosts) > 1 or job.distribution.processes_per_host > 1
    named = namespaces_available()
    if not named and binds:
        raise LaunchError(
            "this job mounts directories in its hosts' private mount namespace (a channel's "
            "view), which this machine does not allow (needs root or user namespaces)"
        )
    addresses = assignment.host_addresses or host_addresses(
        assignment.job_name, assignment.attempt, assignment.hosts, rendezvous_scope(assignment)
    )
    master_address = addresses[assignment.hosts[0]] if named else LOCAL_MASTER
    ctx = LaunchContext(
        job=job,
        job_name=assignment.job_name,
        attempt=assignment.attempt,
        hosts=tuple(assignment.hosts),
        current_host=assignment.current_host,
        command=tuple(command.argv),
        python=command.python,
        entry_point=job.entry_point,
        script_args=tuple(command.args),
        env=env,
        master_addr=assignment.hosts[0] if named else LOCAL_MASTER,
        master_port=_master_port(assignment, master_address),
        remote_shell=remote_shell,
    )
    processes = launcher_for(job.distribution.launcher).processes(ctx)
    shown = list(processes[0].argv)
    if not named:
        warnings = [NO_ISOLATION]
        if distributed:
            warnings.append(NO_NAMESPACES.format(host=assignment.hosts[0]))
        addresses = dict.fromkeys(assignment.hosts, LOCAL_MASTER)
        return HostLaunch([_release_at_address(p, addresses) for p in processes], shown, warnings)
    owned = namespace is None
    if namespace is None:
        namespace = hold_host_namespace(assignment, state_dir, binds, opt_ml, isolation)
    try:
        if len(processes) == 1:  # the holder starts it: no process joins for it
            spawn = namespace.run_held(assignment.hosts)
            held = [_release_at_address(processes[0], addresses)]
            return HostLaunch(held, shown, [], namespace if owned else None, spawn)
        joined = [_wrapped(p, namespace.join(p.argv, assignment.hosts, opt_ml)) for p in processes]
    except NamespaceError as exc:
        raise LaunchError(f"cannot make this host's namespaces: {exc}") from None
    return HostLaunch(
        [_release_at_address(p, addresses) for p in joined],
        shown,
        [],
        namespace=namespace if owned else None,
    )


def rendezvous_scope(assignment: Assignment) -> str:
    """What tells a job from another of the same name on this machine (one of another
    ``trainops`` home, whose hosts would otherwise get the same loopback addresses and
    rendezvous port, and meet): where its code and outputs are, the same on each of its hosts."""
    return f"{assignment.output_prefix}|{assignment.code_uri}"


def _master_port(assignment: Assignment, address: str) -> int:
    """The job's rendezvous port (see :func:`job_port`). A job of one host needs no other host
    to agree on it: where another program (a job of the same name under another home, say)
    already holds that port at the master's address, it gets a free one instead of failing
    with EADDRINUSE. The hosts of a larger job each derive the same port, so it stays fixed."""
    port = job_port(assignment.job_name, assignment.attempt, rendezvous_scope(assignment))
    if len(assignment.hosts) > 1 or _bindable(address, port):
        return port
    return _free_port(address) or port


def _bindable(address: str, port: int) -> bool:
    """Whether a listener could bind ``port`` at ``address`` now (one that cannot be tried, on
    an address not of this machine, counts as bindable: the launch will say what is wrong)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as exc:
            return exc.errno != errno.EADDRINUSE
    return True


def _free_port(address: str) -> int | None:
    """A port the kernel finds free at ``address``; ``None`` where none can be had there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return None
        return int(probe.getsockname()[1])


def start_host_namespace(
    assignment: Assignment,
    state_dir: Path,
    binds: Sequence[Bind],
    opt_ml: Path | None,
    isolation: Isolation,
) -> HostNamespace:
    """Start making the host's namespaces (where :func:`namespaces_available`); its
    :meth:`~HostNamespace.ready` waits for them."""
    addresses = assignment.host_addresses or host_addresses(
        assignment.job_name, assignment.attempt, assignment.hosts, rendezvous_scope(assignment)
    )
    hosts_file = state_dir / "hosts"
    write_hosts_file(hosts_file, addresses)
    try:
        mounts = mount_arguments(binds, opt_ml)
    except OSError as exc:
        raise LaunchError(f"a channel's mount is gone before the script started: {exc}") from None
    arguments = hold_arguments(
        assignment.current_host,
        hosts_file,
        mounts,
        isolation.masks,
        isolation.keeps,
        read_only=isolation.read_only,
    )
    try:
        return HostNamespace.start(arguments)
    except OSError as exc:
        raise LaunchError(f"cannot make this host's namespaces: {exc}") from None


def hold_host_namespace(
    assignment: Assignment,
    state_dir: Path,
    binds: Sequence[Bind],
    opt_ml: Path | None,
    isolation: Isolation,
) -> HostNamespace:
    """The host's namespaces, made; a clear error where they cannot be."""
    namespace = start_host_namespace(assignment, state_dir, binds, opt_ml, isolation)
    try:
        namespace.ready()
    except NamespaceError as exc:
        raise LaunchError(f"cannot make this host's namespaces: {exc}") from None
    return namespace


def _release_at_address(process: RankProcess, addresses: dict[str, str]) -> RankProcess:
    """``release_after`` names a job host; the agent, outside the host's namespace, needs its
    address."""
    if process.release_after is None:
        return process
    host, port = process.release_after
    return dataclasses.replace(process, release_after=(addresses.get(host, host), port))


def _wrapped(process: RankProcess, argv: list[str]) -> RankProcess:
    return dataclasses.replace(process, argv=tuple(argv))
