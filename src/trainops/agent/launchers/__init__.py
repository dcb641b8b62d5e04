"""Launchers: what processes a host starts for a job, one private module per launcher.

The table maps the spec's launcher (``SubmittedJob.distribution.launcher``) to its
implementation. To add one, see docs/internals/launchers.md; every launcher passes
tests/agent/test_launchers.py.
"""

from trainops.agent.launchers._base import (
    LaunchContext,
    Launcher,
    LaunchError,
    RankProcess,
    RemoteShellPaths,
    job_port,
    remote_shell_paths,
    rendezvous_env,
)
from trainops.agent.launchers._mpi import MpiLauncher
from trainops.agent.launchers._plain import PlainLauncher
from trainops.agent.launchers._tensorflow import (
    MultiWorkerMirroredLauncher,
    ParameterServerLauncher,
)
from trainops.agent.launchers._torchrun import TorchrunLauncher

__all__ = [
    "LAUNCHERS",
    "LaunchContext",
    "LaunchError",
    "Launcher",
    "RankProcess",
    "RemoteShellPaths",
    "available_launchers",
    "job_port",
    "launcher_for",
    "remote_shell_paths",
    "rendezvous_env",
]

_PLAIN = PlainLauncher()
LAUNCHERS: dict[str, Launcher] = {
    "plain": _PLAIN,
    "pytorchddp": _PLAIN,
    "smdistributed.dataparallel": _PLAIN,
    "torch_distributed": TorchrunLauncher(),
    "multi_worker_mirrored_strategy": MultiWorkerMirroredLauncher(),
    "parameter_server": ParameterServerLauncher(),
    "mpi": MpiLauncher(),
}


def available_launchers() -> frozenset[str]:
    """The spec launcher names a host agent can start."""
    return frozenset(LAUNCHERS)


def launcher_for(name: str) -> Launcher:
    try:
        return LAUNCHERS[name]
    except KeyError:
        known = ", ".join(sorted(LAUNCHERS))
        raise ValueError(f"no launcher {name!r} (available: {known})") from None
