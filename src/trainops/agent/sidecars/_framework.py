"""The framework sidecar: step timing, profiling windows and the debugger hook inside the script.

It starts nothing of its own. It puts trainops' bootstrap directory (whose
``sitecustomize.py`` installs the PyTorch step-timing hooks and the debugger hook when the
script imports torch, and offers an ``smdebug``-compatible package) first on the script's
``PYTHONPATH``, keeping what is there. The recorder inside the script writes under
``TRAINOPS_PROFILER_DIR`` per the job's ``TRAINOPS_PROFILER_CONFIG``, both set by the profiler
sidecar before this one, which also mirrors that directory to the job's profiler prefix; the
debugger hook reads the host's ``input/config/debughookconfig.json``. With neither in place
this sidecar adds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from trainops.agent.contract._outputs import Artifact
from trainops.agent.sidecars._base import Sidecar, SidecarContext
from trainops.profiler import DIR_ENV
from trainops.profiler._bootstrap import BOOTSTRAP_DIR

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
        if not env.get(DIR_ENV):
            if self.context.job.profiling is not None:
                self.context.log(f"Step timing is off: {DIR_ENV} is not set for the script")
            if not debugging:
                return {}
        bootstrap = str(BOOTSTRAP_DIR)
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != bootstrap]
        return {"PYTHONPATH": os.pathsep.join([bootstrap, *rest])}

    def start(self) -> None:
        return None

    def finish(self) -> list[Artifact]:
        return []


def framework_sidecar(context: SidecarContext) -> Sidecar | None:
    """The sidecar when the job profiles (``profiler_config`` given, not disabled) or has a
    debugger hook config (``debugger_hook_config``)."""
    declared = getattr(context.job, "debugger_hook_config", None) is not None
    if context.job.profiling is None and not declared:
        return None
    return FrameworkSidecar(context)
