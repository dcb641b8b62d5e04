"""One sample of the host: CPU per core, I/O wait, memory, disk and network rates, GPUs.

Column names and units are :mod:`trainops.profiler._names`'s. Rates and utilizations are over
the time since the previous sample (the first, since the sampler was made). The CPUs measured
are the host's: the cores this process may run on (the agent pins itself to the host's
reserved CPUs), or the ones given; ``cpu`` and ``iowait`` are over those cores. Memory, disk
and network are the machine's.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainops.monitor._nvml import Gpus, open_gpus
from trainops.monitor._procfs import (
    CpuTimes,
    ProcFile,
    block_devices,
    parse_cpu_times,
    parse_diskstats,
    parse_meminfo,
    parse_net_dev,
)
from trainops.profiler._names import (
    core_column,
    gpu_column,
    gpu_memory_bytes_column,
    gpu_memory_column,
)

__all__ = ["SystemSampler"]


class SystemSampler:
    """Takes samples of the host (see the module docstring); :attr:`columns` names their values.

    ``cores``: CPU numbers to measure (default: this process's affinity); ``gpus``: NVML
    indexes (default: every GPU) or ``False`` for none; ``proc`` and ``sys_block`` are the
    kernel's trees (tests point them elsewhere). Not thread-safe: one sampler per thread.
    """

    def __init__(
        self,
        *,
        cores: Iterable[int] | None = None,
        gpus: Iterable[int] | bool | None = None,
        proc: Path = Path("/proc"),
        sys_block: Path = Path("/sys/block"),
    ) -> None:
        chosen = sorted(cores) if cores is not None else sorted(_affinity())
        self._cores = frozenset(chosen)
        self._stat = ProcFile(proc / "stat")
        self._meminfo = ProcFile(proc / "meminfo")
        self._devices = block_devices(sys_block)
        self._disk = ProcFile(proc / "diskstats") if self._devices else None
        self._net = ProcFile(proc / "net" / "dev")
        self.gpus: Gpus | None = None
        self.gpu_status = "off: not asked for"
        if gpus is not False:
            opened = open_gpus(None if gpus is None or gpus is True else list(gpus))
            if isinstance(opened, str):
                self.gpu_status = opened
            else:
                self.gpus, self.gpu_status = opened, "nvml"
        self.memory_total = parse_meminfo(self._meminfo.read())[0]
        self._last_cpu = parse_cpu_times(self._stat.read(), self._cores)
        self.cores = sorted(self._last_cpu)
        self._last_io = self._io_counters()
        self._last_at = time.monotonic()
        self.columns = self._columns()

    def _columns(self) -> list[str]:
        names = ["time", "cpu", *(core_column(c) for c in self.cores), "iowait", "memory"]
        names.append("memory_bytes")
        if self._disk is not None:
            names += ["disk_read", "disk_write"]
        names += ["net_rx", "net_tx"]
        for gpu in self.gpu_info:
            index = gpu["index"]
            names += [gpu_column(index), gpu_memory_column(index), gpu_memory_bytes_column(index)]
        return names

    @property
    def gpu_info(self) -> list[dict[str, Any]]:
        """The watched GPUs as ``meta/<host>.json`` lists them (empty when GPU metrics are off)."""
        return [] if self.gpus is None else [g.to_json() for g in self.gpus.info]

    def _io_counters(self) -> tuple[int, int, int, int]:
        read = written = 0
        if self._disk is not None:
            read, written = parse_diskstats(self._disk.read(), self._devices)
        received, sent = parse_net_dev(self._net.read())
        return read, written, received, sent

    def sample(self) -> dict[str, float]:
        """Every column's value now, ``time`` (Unix seconds) included."""
        stamp = time.time()
        cpu_now = parse_cpu_times(self._stat.read(), self._cores)
        total_bytes, available = parse_meminfo(self._meminfo.read())
        io_now = self._io_counters()
        now = time.monotonic()
        elapsed = max(now - self._last_at, 1e-9)
        values = {"time": stamp}
        values.update(_cpu(self._last_cpu, cpu_now))
        used = total_bytes - available
        values["memory"] = 100.0 * used / total_bytes
        values["memory_bytes"] = float(used)
        rates = [max(0, b - a) / elapsed for a, b in zip(self._last_io, io_now, strict=True)]
        if self._disk is not None:
            values["disk_read"], values["disk_write"] = rates[0], rates[1]
        values["net_rx"], values["net_tx"] = rates[2], rates[3]
        if self.gpus is not None:
            for index, (busy, memory, memory_bytes) in self.gpus.sample().items():
                values[gpu_column(index)] = busy
                values[gpu_memory_column(index)] = memory
                values[gpu_memory_bytes_column(index)] = memory_bytes
        self._last_cpu, self._last_io, self._last_at = cpu_now, io_now, now
        return values

    def row(self) -> tuple[float, ...]:
        """One sample as a row of :attr:`columns` (NaN for a column it lacks)."""
        values = self.sample()
        return tuple(values.get(name, math.nan) for name in self.columns)

    def close(self) -> None:
        for proc_file in (self._stat, self._meminfo, self._disk, self._net):
            if proc_file is not None:
                proc_file.close()
        if self.gpus is not None:
            self.gpus.close()
            self.gpus = None

    def __enter__(self) -> SystemSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cpu(before: dict[int, CpuTimes], after: dict[int, CpuTimes]) -> dict[str, float]:
    """Per-core and overall utilization, and I/O wait, between two readings (a core that went
    offline in between reads NaN)."""
    out: dict[str, float] = {}
    busy_sum = iowait_sum = total_sum = 0
    for core, (busy, iowait, total) in after.items():
        previous = before.get(core)
        if previous is None:
            out[core_column(core)] = math.nan
            continue
        d_busy, d_iowait, d_total = busy - previous[0], iowait - previous[1], total - previous[2]
        busy_sum += d_busy
        iowait_sum += d_iowait
        total_sum += d_total
        out[core_column(core)] = _percent(d_busy, d_total)
    out["cpu"] = _percent(busy_sum, total_sum)
    out["iowait"] = _percent(iowait_sum, total_sum)
    return out


def _percent(part: int, whole: int) -> float:
    """``part`` of ``whole`` in percent; NaN when no jiffy passed (the sample came too soon)."""
    if whole <= 0:
        return math.nan
    return min(100.0, max(0.0, 100.0 * part / whole))


def _affinity() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))
