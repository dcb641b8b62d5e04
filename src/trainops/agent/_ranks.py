"""The processes this host starts for its job: the launch context built and its launcher asked.

A job of more than one process gets host names that resolve (``_hostns``): every process runs
in the host's own namespace, where ``algo-N`` names this host's loopback address and
``MASTER_ADDR`` is the first host's name, as on SageMaker. Where the machine allows no
namespaces, the master is 127.0.0.1 (every local host is this machine) and the log says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from trainops.agent._hostns import host_addresses, namespaces_available, wrap, write_hosts_file
from trainops.agent._setup import ScriptCommand
from trainops.agent.launchers import (
    LaunchContext,
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
) -> HostLaunch:
    """What this host runs, as the job's launcher lays it out; ``remote_shell`` is how the
    launcher may start programs on the job's other hosts."""
    job = assignment.spec
    distributed = len(assignment.hosts) > 1 or job.distribution.processes_per_host > 1
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
        processes = _in_host_namespace(assignment, processes, addresses, state_dir / "hosts")
    else:
        addresses = dict.fromkeys(assignment.hosts, LOCAL_MASTER)
        if distributed:
            warnings.append(NO_NAMESPACES.format(host=assignment.hosts[0]))
    processes = [_release_at_address(p, addresses) for p in processes]
    return HostLaunch(processes, shown, warnings)


def _release_at_address(process: RankProcess, addresses: dict[str, str]) -> RankProcess:
    """``release_after`` names a job host; the agent, outside the host's namespace, needs its
    address."""
    if process.release_after is None:
        return process
    host, port = process.release_after
    return dataclasses.replace(process, release_after=(addresses.get(host, host), port))


def _in_host_namespace(
    assignment: Assignment,
    processes: list[RankProcess],
    addresses: dict[str, str],
    hosts_file: Path,
) -> list[RankProcess]:
    write_hosts_file(hosts_file, addresses)
    host, hosts = assignment.current_host, assignment.hosts
    return [
        dataclasses.replace(p, argv=tuple(wrap(p.argv, host, hosts_file, hosts))) for p in processes
    ]
