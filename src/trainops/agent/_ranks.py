"""The processes this host starts for its job: the launch context built and its launcher asked.

A job of more than one process gets host names that resolve (``_hostns``): every process runs
in the host's own namespace, where ``algo-N`` names this host's loopback address and
``MASTER_ADDR`` is the first host's name, as on SageMaker. Where the machine allows no
namespaces, the master is 127.0.0.1 (every local host is this machine) and the log says so.
A job whose channels bind directories, or that asks for ``mount_opt_ml``, runs in the
namespace too, even with one process; where no namespace can be made it cannot start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainops.agent._hostns import (
    host_addresses,
    mount_arguments,
    namespaces_available,
    wrap,
    write_hosts_file,
)
from trainops.agent._setup import ScriptCommand
from trainops.agent.channels import Bind
from trainops.agent.launchers import (
    LaunchContext,
    LaunchError,
    RankProcess,
    RemoteShellPaths,
    job_port,
    launcher_for,
)
from trainops.protocol import Assignment

__all__ = ["LOCAL_MASTER", "HostLaunch", "host_processes"]

LOCAL_MASTER = "127.0.0.1"
NO_NAMESPACES = (
    "host names such as {host} do not resolve here: this machine allows no mount/UTS "
    "namespaces (needs root or user namespaces), so MASTER_ADDR is 127.0.0.1"
)


@dataclass(frozen=True, slots=True)
class HostLaunch:
    """What this host starts, the command to show for it, and warnings for the host log."""

    processes: list[RankProcess]
    command: list[str]
    warnings: list[str]


def host_processes(
    assignment: Assignment,
    command: ScriptCommand,
    env: dict[str, str],
    state_dir: Path,
    remote_shell: RemoteShellPaths | None = None,
    *,
    binds: Sequence[Bind] = (),
    opt_ml: Path | None = None,
) -> HostLaunch:
    """What this host runs, as the job's launcher lays it out; ``remote_shell`` is how the
    launcher may start programs on the job's other hosts; ``binds`` (the channels') and
    ``opt_ml`` (the host's tree, to show at /opt/ml) are mounted in the host's namespace."""
    job = assignment.spec
    distributed = len(assignment.hosts) > 1 or job.distribution.processes_per_host > 1
    mounts = _mounts(binds, opt_ml)
    named = distributed and namespaces_available()
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
        master_port=job_port(assignment.job_name, assignment.attempt),
        remote_shell=remote_shell,
    )
    processes = launcher_for(job.distribution.launcher).processes(ctx)
    shown = list(processes[0].argv)
    warnings = []
    if named:
        addresses = assignment.host_addresses or host_addresses(
            assignment.job_name, assignment.attempt, assignment.hosts
        )
        hosts_file = state_dir / "hosts"
        processes = _in_host_namespace(assignment, processes, addresses, hosts_file, mounts)
    else:
        addresses = dict.fromkeys(assignment.hosts, LOCAL_MASTER)
        if distributed:
            warnings.append(NO_NAMESPACES.format(host=assignment.hosts[0]))
        if mounts:
            processes = [_wrapped(p, wrap(p.argv, None, None, (), mounts)) for p in processes]
    processes = [_release_at_address(p, addresses) for p in processes]
    return HostLaunch(processes, shown, warnings)


def _release_at_address(process: RankProcess, addresses: dict[str, str]) -> RankProcess:
    """``release_after`` names a job host; the agent, outside the host's namespace, needs its
    address."""
    if process.release_after is None:
        return process
    host, port = process.release_after
    return dataclasses.replace(process, release_after=(addresses.get(host, host), port))


def _mounts(binds: Sequence[Bind], opt_ml: Path | None) -> list[str]:
    """The namespace arguments for the host's mounts; a clear error where none can be made."""
    if not binds and opt_ml is None:
        return []
    if not namespaces_available():
        raise LaunchError(
            "this job mounts directories in its hosts' private mount namespace (a channel's "
            "view or mount_opt_ml), which this machine does not allow (needs root or user "
            "namespaces)"
        )
    try:
        return mount_arguments(binds, opt_ml)
    except OSError as exc:
        raise LaunchError(f"a channel's mount is gone before the script started: {exc}") from None


def _wrapped(process: RankProcess, argv: list[str]) -> RankProcess:
    return dataclasses.replace(process, argv=tuple(argv))


def _in_host_namespace(
    assignment: Assignment,
    processes: list[RankProcess],
    addresses: dict[str, str],
    hosts_file: Path,
    mounts: Sequence[str],
) -> list[RankProcess]:
    write_hosts_file(hosts_file, addresses)
    host, hosts = assignment.current_host, assignment.hosts
    return [_wrapped(p, wrap(p.argv, host, hosts_file, hosts, mounts)) for p in processes]
