"""Simulating a declared instance type honestly: CPU pinning, and warnings where it is smaller.

The agent pins itself to the host's reserved CPUs before it starts any thread, so every process
it starts inherits the affinity; where the reservation (or the machine) is smaller than the
instance type, the host log says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from trainops.agent.contract._environment import count_machine_gpus
from trainops.catalog import InstanceType, get_instance_type
from trainops.protocol import HostResources

__all__ = ["capacity_warnings", "host_warnings", "machine_memory_mb", "pin_cpus"]


def pin_cpus(cpus: Sequence[int]) -> bool:
    """Restrict this process (and its future children) to ``cpus``; ``False`` if not possible."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(0, set(cpus))
    except (OSError, ValueError):
        return False
    return True


def machine_memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (OSError, ValueError):
        return 0


def capacity_warnings(
    instance: InstanceType,
    resources: HostResources,
    *,
    machine_cpus: int,
    machine_memory: int,
    machine_gpus: int,
) -> list[str]:
    """One line per resource where this host has less than the instance type."""
    cpus = resources.num_cpus or machine_cpus
    memory_mb = resources.memory_mb or machine_memory
    gpus = resources.num_gpus
    lines = []
    if cpus < instance.vcpus:
        lines.append(
            f"warning: {instance.name} has {instance.vcpus} vCPUs; this host runs on {cpus}"
        )
    if memory_mb and memory_mb < instance.memory_gib * 1024:
        lines.append(
            f"warning: {instance.name} has {instance.memory_gib:g} GiB of memory; "
            f"this host has {memory_mb / 1024:.1f} GiB"
        )
    if gpus < instance.gpus:
        where = f" (the machine has {machine_gpus})" if machine_gpus < instance.gpus else ""
        lines.append(
            f"warning: {instance.name} has {instance.gpus} GPUs; this host runs on {gpus}{where}"
        )
    return lines


def host_warnings(instance_type: str, resources: HostResources) -> list[str]:
    """:func:`capacity_warnings` for this machine."""
    return capacity_warnings(
        get_instance_type(instance_type),
        resources,
        machine_cpus=os.cpu_count() or 1,
        machine_memory=machine_memory_mb(),
        machine_gpus=count_machine_gpus(),
    )
