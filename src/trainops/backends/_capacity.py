"""Capacity accounting: which CPUs, GPUs and how much memory each running job holds.

A host of a job needs ``min(type vCPUs, capacity / hosts)`` CPUs (at least one), likewise for
memory and GPUs, so any job fits an idle machine, however small; a job needs all its hosts at
once (gang), and jobs wait instead of oversubscribing a busy machine. With more hosts than CPUs
(or GPUs) the job takes them all and its hosts share them round-robin.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from trainops.catalog import InstanceType

__all__ = [
    "Allocator",
    "Capacity",
    "CapacityNeverFits",
    "CapacityShortage",
    "HostDemand",
    "Slots",
    "host_demand",
]


class CapacityShortage(Exception):
    """The job does not fit right now; the message says what it waits for."""


class CapacityNeverFits(CapacityShortage):
    """The job cannot fit however long it waits (no machine of the backend can hold a host of
    it, nor ever will); the message says why. The control plane fails the job."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """Amounts of CPUs, memory and GPUs (a whole machine, or what is free of it)."""

    cpus: int
    memory_mb: int
    gpus: int


@dataclass(frozen=True, slots=True)
class HostDemand:
    """What each of ``count`` hosts of a job needs."""

    cpus: int
    memory_mb: int
    gpus: int
    count: int


@dataclass(frozen=True, slots=True)
class Slots:
    """What one host holds: CPU and GPU slot numbers (0 .. capacity-1) and memory."""

    cpus: tuple[int, ...]
    gpus: tuple[int, ...]
    memory_mb: int

    def to_json(self) -> dict[str, Any]:
        return {"cpus": list(self.cpus), "gpus": list(self.gpus), "memory_mb": self.memory_mb}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Slots:
        cpus, gpus = tuple(raw.get("cpus", ())), tuple(raw.get("gpus", ()))
        return cls(cpus, gpus, int(raw.get("memory_mb", 0)))


def host_demand(instance: InstanceType, count: int, capacity: Capacity) -> HostDemand:
    memory_mb = min(int(instance.memory_gib * 1024), capacity.memory_mb // count)
    return HostDemand(
        cpus=_per_host(instance.vcpus, capacity.cpus, count),
        memory_mb=memory_mb,
        gpus=_per_host(instance.gpus, capacity.gpus, count),
        count=count,
    )


def _per_host(wanted: int, available: int, count: int) -> int:
    if wanted <= 0 or available <= 0:
        return 0
    return max(1, min(wanted, available // count))


class Allocator:
    """Reserves slots for jobs; thread-safe."""

    def __init__(self, capacity: Capacity) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._held: dict[str, list[Slots]] = {}

    def free(self) -> Capacity:
        with self._lock:
            return self._free()

    def _free(self) -> Capacity:
        slots = [s for held in self._held.values() for s in held]
        used_cpus = {c for s in slots for c in s.cpus}
        used_gpus = {g for s in slots for g in s.gpus}
        return Capacity(
            cpus=self.capacity.cpus - len(used_cpus),
            memory_mb=self.capacity.memory_mb - sum(s.memory_mb for s in slots),
            gpus=self.capacity.gpus - len(used_gpus),
        )

    def reserve(self, job: str, instance: InstanceType, count: int) -> list[Slots]:
        """Slots for each host of ``job``, or :class:`CapacityShortage` saying what is missing."""
        demand = host_demand(instance, count, self.capacity)
        with self._lock:
            if job in self._held:
                return list(self._held[job])
            self._check_fits(demand)
            cpus = _take(self._free_ids("cpus", self.capacity.cpus), demand.cpus, count)
            gpus = _take(self._free_ids("gpus", self.capacity.gpus), demand.gpus, count)
            held = [Slots(cpus[i], gpus[i], demand.memory_mb) for i in range(count)]
            self._held[job] = held
            return list(held)

    def adopt(self, job: str, slots: list[Slots]) -> None:
        """Mark slots found in the store (after a restart) as held by ``job``."""
        with self._lock:
            self._held[job] = list(slots)

    def release(self, job: str) -> None:
        with self._lock:
            self._held.pop(job, None)

    def holds(self, job: str) -> bool:
        with self._lock:
            return job in self._held

    def _free_ids(self, kind: str, total: int) -> list[int]:
        used = {i for held in self._held.values() for s in held for i in getattr(s, kind)}
        return [i for i in range(total) if i not in used]

    def _check_fits(self, demand: HostDemand) -> None:
        free = self._free()
        shortages = [
            _shortage("CPU", demand.cpus, demand.count, self.capacity.cpus, free.cpus),
            _shortage("MB memory", demand.memory_mb, demand.count, None, free.memory_mb),
            _shortage("GPU", demand.gpus, demand.count, self.capacity.gpus, free.gpus),
        ]
        found = [s for s in shortages if s]
        if found:
            raise CapacityShortage("; ".join(found))


def _shortage(unit: str, per_host: int, count: int, total: int | None, free: int) -> str:
    needed = per_host * count
    if total is not None:
        needed = min(needed, total)
    if needed <= free:
        return ""
    hosts = f"{count} host{'s' if count != 1 else ''}"
    plural = "s" if unit in ("CPU", "GPU") and per_host != 1 else ""
    if total is not None and per_host * count > total:
        return f"needs all {total} {unit}s ({hosts} share them); {free} free"
    return f"needs {per_host} {unit}{plural} per host x {hosts}; {free} free"


def _take(free: list[int], per_host: int, count: int) -> list[tuple[int, ...]]:
    """Lowest free ids first; hosts share round-robin when there are fewer ids than needed."""
    if per_host == 0:
        return [() for _ in range(count)]
    taken = free[: per_host * count]
    return [
        tuple(sorted({taken[(i * per_host + k) % len(taken)] for k in range(per_host)}))
        for i in range(count)
    ]
