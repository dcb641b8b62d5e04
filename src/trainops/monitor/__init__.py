"""The system monitor: per-core CPU, I/O wait, memory, disk, network and GPU metrics of a host.

:class:`SystemSampler` takes one sample (from /proc, kept open, and NVML where there are
GPUs); :class:`SystemMonitor` samples on a fixed schedule on a thread of its own and writes
profiler chunks (``system/<host>/``) and ``meta/<host>.json`` into a local profiler tree,
which the agent's profiler sidecar mirrors to the job's profiler prefix. Column names and units
are :mod:`trainops.profiler`'s. docs/profiling-system.md shows it at work.
"""

from __future__ import annotations

from trainops.monitor._monitor import SystemMonitor, write_meta
from trainops.monitor._nvml import GpuInfo, Gpus, open_gpus
from trainops.monitor._procfs import block_devices
from trainops.monitor._sampler import SystemSampler

__all__ = [
    "GpuInfo",
    "Gpus",
    "SystemMonitor",
    "SystemSampler",
    "block_devices",
    "open_gpus",
    "write_meta",
]
