"""``local`` and ``local_gpu``: SageMaker local mode's instance types, meaning "this machine".

In the SageMaker Python SDK, ``instance_type="local"`` runs the job on the calling machine
(``local_gpu`` with its GPUs). Here they are instance types whose hardware is the machine that
looks them up (the control plane's machine when placing hosts, the host's when it checks its
reservation): all its CPUs and memory, no GPUs for ``local`` and all of its NVIDIA GPUs for
``local_gpu`` (at least one, so a machine without one is warned about). They cost nothing.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NamedTuple

__all__ = ["LOCAL_TYPES", "MachineHardware", "machine_hardware"]

LOCAL_TYPES = ("local", "local_gpu")


class MachineHardware(NamedTuple):
    """What this machine has, as a local instance type declares it."""

    vcpus: int
    memory_gib: float
    gpus: int


def machine_hardware(name: str, dev: Path = Path("/dev")) -> MachineHardware:
    """The hardware of local type ``name`` on this machine."""
    gpus = max(_count_gpus(dev), 1) if name == "local_gpu" else 0
    # Rounded down to 0.1 GiB: rounded to nearest, 23.57 GiB became 23.6, and every host of a
    # ``local`` job was warned that it had less memory than its own instance type.
    memory_gib = math.floor(_memory_bytes() / 1024**3 * 10) / 10
    return MachineHardware(os.cpu_count() or 1, memory_gib, gpus)


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


def _count_gpus(dev: Path) -> int:
    """NVIDIA GPUs (``/dev/nvidia<N>``), counted without running nvidia-smi."""
    try:
        names = [p.name for p in dev.iterdir() if p.name.startswith("nvidia")]
    except OSError:
        return 0
    return sum(1 for name in names if name.removeprefix("nvidia").isdigit())
