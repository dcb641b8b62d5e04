"""Launchers: what processes a host starts for a job, one private module per launcher.

The registry :data:`LAUNCHERS` maps the spec's launcher (``SubmittedJob.distribution.launcher``) to its
implementation. To add one, see docs/internals/launchers.md; every launcher passes
tests/agent/test_launchers.py.
"""

from trainops._registry import Registry
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
from trainops.agent.launchers._smddp import SmDataParallelLauncher
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

LAUNCHERS: Registry[Launcher] = Registry("launcher", error=ValueError)
_PLAIN = LAUNCHERS.register("plain", PlainLauncher())
_SMDDP = LAUNCHERS.register("smdistributed.dataparallel", SmDataParallelLauncher())
LAUNCHERS.register("pytorchddp", _SMDDP)  # SageMaker starts both with its SMDataParallel runner
LAUNCHERS.register("torch_distributed", TorchrunLauncher())
LAUNCHERS.register("multi_worker_mirrored_strategy", MultiWorkerMirroredLauncher())
LAUNCHERS.register("parameter_server", ParameterServerLauncher())
LAUNCHERS.register("mpi", MpiLauncher())


def available_launchers() -> frozenset[str]:
    """The spec launcher names a host agent can start."""
    return frozenset(LAUNCHERS.names())


def launcher_for(name: str) -> Launcher:
    return LAUNCHERS.lookup(name)
