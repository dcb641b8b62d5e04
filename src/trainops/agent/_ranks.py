"""The processes this host starts for its job: the launch context built and its launcher asked.

The master address is the first host's name when that name resolves here; on the local backend,
where host names do not resolve yet, every host is this machine and the master is 127.0.0.1.
"""

from __future__ import annotations

import socket

from trainops.agent._setup import ScriptCommand
from trainops.agent.launchers import LaunchContext, RankProcess, job_port, launcher_for
from trainops.protocol import Assignment

__all__ = ["LOCAL_MASTER", "host_processes", "master_address"]

LOCAL_MASTER = "127.0.0.1"


def host_processes(
    assignment: Assignment, command: ScriptCommand, env: dict[str, str]
) -> list[RankProcess]:
    """What this host runs, as the job's launcher lays it out."""
    job = assignment.spec
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
        master_addr=master_address(assignment.hosts[0]),
        master_port=job_port(assignment.job_name, assignment.attempt),
    )
    return launcher_for(job.distribution.launcher).processes(ctx)


def master_address(host: str) -> str:
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return LOCAL_MASTER
    return host
