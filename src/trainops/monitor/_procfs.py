"""Reading the kernel's counters cheaply: /proc files kept open, re-read from offset 0.

Each :class:`ProcFile` holds its file descriptor for the monitor's life and re-reads it with
one ``pread`` into a buffer sized from the previous read (the kernel regenerates a /proc file on
every read from offset 0), so a sample costs a few system calls and a little byte splitting; the
parsers below take exactly the fields they need and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "CpuTimes",
    "ProcFile",
    "block_devices",
    "parse_cpu_times",
    "parse_diskstats",
    "parse_meminfo",
    "parse_net_dev",
]

#: (busy, iowait, total) jiffies of one CPU line of /proc/stat.
CpuTimes = tuple[int, int, int]

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's own size
_VIRTUAL_ROOTS = ("loop", "ram", "zram")


class ProcFile:
    """One /proc file, open for the monitor's life; :meth:`read` returns its current text."""

    def __init__(self, path: Path, *, size_hint: int = 4096) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._size = size_hint

    def read(self) -> bytes:
        """The whole file as the kernel generates it now (one ``pread`` when the buffer fits)."""
        while True:
            data = os.pread(self._fd, self._size, 0)
            if len(data) < self._size:
                if len(data) * 2 > self._size:
                    self._size = max(4096, len(data) * 2)
                return data
            self._size *= 2

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def parse_cpu_times(data: bytes, cores: frozenset[int] | None) -> dict[int, CpuTimes]:
    """Per-core (busy, iowait, total) jiffies from /proc/stat, for ``cores`` (None: every core).

    ``total`` sums user, nice, system, idle, iowait, irq, softirq and steal (guest time is
    counted in user already); ``busy`` is ``total`` less idle and iowait.
    """
    found: dict[int, CpuTimes] = {}
    for line in data.split(b"\n"):
        if not line.startswith(b"cpu"):
            if found:
                break  # the cpu lines come first and together
            continue
        name, _, rest = line.partition(b" ")
        number = name[3:]
        if not number:
            continue  # the aggregate "cpu" line: the selected cores are summed instead
        core = int(number)
        if cores is not None and core not in cores:
            continue
        fields = rest.split()
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, fields[:8])
        total = user + nice + system + idle + iowait + irq + softirq + steal
        found[core] = (total - idle - iowait, iowait, total)
    return found


def parse_meminfo(data: bytes) -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo."""
    total = available = -1
    for line in data.split(b"\n"):
        if line.startswith(b"MemTotal:"):
            total = int(line.split()[1]) * 1024
        elif line.startswith(b"MemAvailable:"):
            available = int(line.split()[1]) * 1024
            break  # MemAvailable follows MemTotal
    if total < 0 or available < 0:
        raise ValueError("/proc/meminfo has no MemTotal or MemAvailable line")
    return total, available


def parse_diskstats(data: bytes, devices: frozenset[str]) -> tuple[int, int]:
    """(bytes read, bytes written) since boot, summed over ``devices`` (whole devices)."""
    read = written = 0
    for line in data.split(b"\n"):
        fields = line.split()
        if len(fields) >= 10 and fields[2].decode() in devices:
            read += int(fields[5])
            written += int(fields[9])
    return read * SECTOR_BYTES, written * SECTOR_BYTES


def parse_net_dev(data: bytes) -> tuple[int, int]:
    """(bytes received, bytes sent) since boot over every interface but loopback."""
    received = sent = 0
    for line in data.split(b"\n")[2:]:
        name, colon, rest = line.partition(b":")
        if not colon or name.strip() == b"lo":
            continue
        fields = rest.split()
        received += int(fields[0])
        sent += int(fields[8])
    return received, sent


def block_devices(sys_block: Path = Path("/sys/block")) -> frozenset[str]:
    """The block devices whose I/O counts once: physical disks (not partitions, whose I/O their
    disk counts already, nor loop, RAM, device-mapper or md devices, which sit on a disk).

    Where no disk looks physical (a container without /sys), every whole device but loop and
    RAM disks; empty where /sys/block cannot be read.
    """
    try:
        names = sorted(entry.name for entry in sys_block.iterdir())
    except OSError:
        return frozenset()
    physical = [name for name in names if "/devices/virtual/" not in _resolved(sys_block / name)]
    if physical:
        return frozenset(physical)
    return frozenset(name for name in names if not name.startswith(_VIRTUAL_ROOTS))


def _resolved(path: Path) -> str:
    try:
        return os.path.realpath(path) + "/"
    except OSError:
        return "/devices/virtual/"


def close_all(files: Iterable[ProcFile]) -> None:
    for proc_file in files:
        proc_file.close()
