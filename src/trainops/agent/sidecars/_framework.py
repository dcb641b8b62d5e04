"""The framework sidecar: step timing, profiling windows and the debugger hook inside the script.

It starts nothing of its own. It puts trainops' bootstrap directory (whose
``sitecustomize.py`` installs the PyTorch step-timing hooks and the debugger hook when the
script imports torch, and offers an ``smdebug``-compatible package) first on the script's
``PYTHONPATH``, keeping what is there. The recorder inside the script writes under
``TRAINOPS_PROFILER_DIR`` per the job's ``TRAINOPS_PROFILER_CONFIG``, both set by the profiler
sidecar before this one, which also mirrors that directory to the job's profiler prefix; the
debugger hook reads the host's ``input/config/debughookconfig.json``.

A job of more than one process (several hosts, or several processes on one) gets the bootstrap
too, with ``TRAINOPS_YIELD_AT_EXIT=1``: its ``sitecustomize`` then gives torch's collective
threads a moment at the interpreter's exit (see there), so that a rank that has done all its
work does not abort as it ends. With none of this in place the sidecar adds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from trainops.agent.contract._outputs import Artifact
from trainops.agent.sidecars._base import Sidecar, SidecarContext
from trainops.profiler import DIR_ENV
from trainops.profiler._bootstrap import BOOTSTRAP_DIR, YIELD_AT_EXIT_ENV
from trainops.protocol import SubmittedJob

#: The debugger hook's config in the host tree's ``input/config`` (SageMaker's name).
DEBUG_HOOK_CONFIG = "debughookconfig.json"

__all__ = ["FrameworkSidecar", "framework_sidecar"]


class FrameworkSidecar(Sidecar):
    """Adds the bootstrap directory to the script's ``PYTHONPATH`` (see the module docstring)."""

    name = "framework"

    def __init__(self, context: SidecarContext) -> None:
        self.context = context

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        debugging = (self.context.tree.config_dir / DEBUG_HOOK_CONFIG).is_file()
        several = _several_processes(self.context.job)
        added = {YIELD_AT_EXIT_ENV: "1"} if several else {}
        if not env.get(DIR_ENV):
            if self.context.job.profiling is not None:
                self.context.log(f"Step timing is off: {DIR_ENV} is not set for the script")
            if not debugging and not several:
                return {}
        bootstrap = str(BOOTSTRAP_DIR)
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != bootstrap]
        return {"PYTHONPATH": os.pathsep.join([bootstrap, *rest]), **added}

    def start(self) -> None:
        return None

    def finish(self) -> list[Artifact]:
        return []


def framework_sidecar(context: SidecarContext) -> Sidecar | None:
    """The sidecar when the job profiles (``profiler_config`` given, not disabled) or has a
    debugger hook config (``debugger_hook_config``)."""
    declared = getattr(context.job, "debugger_hook_config", None) is not None
    if context.job.profiling is None and not declared and not _several_processes(context.job):
        return None
    return FrameworkSidecar(context)


def _several_processes(job: SubmittedJob) -> bool:
    """Whether the job runs more than one process of its script (hosts x processes per host)."""
    return job.instance_count * job.distribution.processes_per_host > 1
