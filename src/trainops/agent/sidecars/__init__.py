"""Sidecars: what runs beside the training script on every host (see ``_base`` for the contract).

Each kind's factory is registered in :data:`SIDECARS` (a :class:`~trainops._registry.Registry`) (in the order they start; they finish in the
reverse order); :class:`Sidecars` runs a job's set through the agent's phases. Implementations:
checkpoint sync and intermediate-output sync (``_sync``), the system monitor and the profiler
data's mirror (``_profiler``), the debugger hook's configuration and tensors sync
(``_debugger``). docs/internals/sidecars.md says how to add one.
"""

from __future__ import annotations

from trainops.agent.sidecars._base import Sidecar, SidecarContext, SidecarFactory
from trainops.agent.sidecars._set import SIDECARS, Sidecars, register_sidecar
from trainops.agent.sidecars._sync import (
    CheckpointSync,
    IntermediateSync,
    checkpoint_sync,
    intermediate_sync,
)

__all__ = [
    "SIDECARS",
    "CheckpointSync",
    "IntermediateSync",
    "Sidecar",
    "SidecarContext",
    "SidecarFactory",
    "Sidecars",
    "checkpoint_sync",
    "intermediate_sync",
    "register_sidecar",
]


def _profiler(context: SidecarContext) -> Sidecar | None:
    """System monitor + profiler-data mirror, when the job profiles (imported only then)."""
    if context.job.profiling is None:
        return None
    from trainops.agent.sidecars._profiler import profiler_sidecar

    return profiler_sidecar(context)


def _framework(context: SidecarContext) -> Sidecar | None:
    """Step timing, framework profiling and the debugger hook inside the script, when the job
    profiles or has a debugger hook config; the pause at exit of a job of several processes."""
    job = context.job
    several = job.instance_count * job.distribution.processes_per_host > 1
    if job.profiling is None and getattr(job, "debugger_hook_config", None) is None and not several:
        return None
    from trainops.agent.sidecars._framework import framework_sidecar

    return framework_sidecar(context)


def _tensorboard(context: SidecarContext) -> Sidecar | None:
    """TensorBoard event files and their sync, when the job asks for them."""
    if context.job.tensorboard_output_config is None:
        return None
    from trainops.agent.sidecars._tensorboard import tensorboard_sidecar

    return tensorboard_sidecar(context)


def _debugger(context: SidecarContext) -> Sidecar | None:
    """The debugger hook's configuration file and its tensors' sync, when the job has one."""
    if context.job.debugger_hook_config is None:
        return None
    from trainops.agent.sidecars._debugger import debugger_sidecar

    return debugger_sidecar(context)


SIDECARS.register("checkpoints", checkpoint_sync)
SIDECARS.register("intermediate", intermediate_sync)
SIDECARS.register("debugger", _debugger)
# TensorBoard before the profiler's sidecars, so that it finishes after them: it turns their
# last chunks (written when they finish) into scalars too.
SIDECARS.register("tensorboard", _tensorboard)
SIDECARS.register("profiler", _profiler)
SIDECARS.register("framework", _framework)
