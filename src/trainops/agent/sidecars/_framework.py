"""The framework sidecar: step timing and profiling windows inside the training script.

It starts nothing of its own. It puts trainops' bootstrap directory (whose
``sitecustomize.py`` installs the PyTorch step-timing hooks when the script imports torch)
first on the script's ``PYTHONPATH``, keeping what is there; the recorder inside the script
writes under ``TRAINOPS_PROFILER_DIR`` per the job's ``TRAINOPS_PROFILER_CONFIG``, both set by
the profiler sidecar before this one, which also mirrors that directory to the job's profiler
prefix. Without ``TRAINOPS_PROFILER_DIR`` in the environment this sidecar adds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from trainops.agent.contract._outputs import Artifact
from trainops.agent.sidecars._base import Sidecar, SidecarContext
from trainops.profiler import DIR_ENV
from trainops.profiler._bootstrap import BOOTSTRAP_DIR

__all__ = ["FrameworkSidecar", "framework_sidecar"]


class FrameworkSidecar(Sidecar):
    """Adds the bootstrap directory to the script's ``PYTHONPATH`` (see the module docstring)."""

    name = "framework"

    def __init__(self, context: SidecarContext) -> None:
        self.context = context

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        if not env.get(DIR_ENV):
            self.context.log(f"Step timing is off: {DIR_ENV} is not set for the script")
            return {}
        bootstrap = str(BOOTSTRAP_DIR)
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != bootstrap]
        return {"PYTHONPATH": os.pathsep.join([bootstrap, *rest])}

    def start(self) -> None:
        return None

    def finish(self) -> list[Artifact]:
        return []


def framework_sidecar(context: SidecarContext) -> Sidecar | None:
    """The sidecar when the job profiles (``profiler_config`` given, not disabled)."""
    if context.job.profiling is None:
        return None
    return FrameworkSidecar(context)
