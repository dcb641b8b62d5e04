"""The /proc parsers: exact numbers from known text, and agreement with psutil on the real host."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from trainops.monitor import block_devices
from trainops.monitor._procfs import (
    ProcFile,
    parse_cpu_times,
    parse_diskstats,
    parse_meminfo,
    parse_net_dev,
)

STAT = b"""cpu  300 10 100 1000 50 5 5 2 7 0
cpu0 100 5 50 500 25 2 3 1 7 0
cpu1 200 5 50 500 25 3 2 1 0 0
intr 12345 0 1 2
ctxt 999
"""

DISKSTATS = b"""   8       0 sda 100 0 2000 0 50 0 4000 0 0 0 0 0 0 0 0 0 0
   8       1 sda1 100 0 2000 0 50 0 4000 0 0 0 0 0 0 0 0 0 0
 253       0 dm-0 100 0 2000 0 50 0 4000 0 0 0 0 0 0 0 0 0 0
 259       0 nvme0n1 10 0 8 0 1 0 16 0 0 0 0 0 0 0 0 0 0
"""

NET_DEV = b"""Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9999999      29    0    0    0     0          0         0  9999999      29    0    0    0     0       0          0
  eth0:    1000      10    0    0    0     0          0         0     300       5    0    0    0     0       0          0
  eth1:      24       1    0    0    0     0          0         0      76       1    0    0    0     0       0          0
"""


def test_cpu_times_take_busy_iowait_and_total_per_core() -> None:
    times = parse_cpu_times(STAT, None)
    # total: user nice system idle iowait irq softirq steal (guest is inside user already)
    assert times[0] == (100 + 5 + 50 + 2 + 3 + 1, 25, 686)
    assert times[1] == (200 + 5 + 50 + 3 + 2 + 1, 25, 786)
    assert parse_cpu_times(STAT, frozenset({1})) == {1: times[1]}


def test_meminfo_gives_total_and_available_in_bytes() -> None:
    text = b"MemTotal:       2000 kB\nMemFree:         100 kB\nMemAvailable:    500 kB\n"
    assert parse_meminfo(text) == (2000 * 1024, 500 * 1024)
    with pytest.raises(ValueError, match="MemAvailable"):
        parse_meminfo(b"MemTotal: 2000 kB\n")


def test_diskstats_counts_the_chosen_whole_devices_in_bytes() -> None:
    # sda1 and dm-0 sit on sda: counting them too would count the same bytes three times
    assert parse_diskstats(DISKSTATS, frozenset({"sda", "nvme0n1"})) == (2008 * 512, 4016 * 512)


def test_net_dev_sums_every_interface_but_loopback() -> None:
    assert parse_net_dev(NET_DEV) == (1024, 376)


def _link(sys_block: Path, name: str, target: str) -> None:
    device = sys_block.parent / "devices" / target / name
    device.mkdir(parents=True)
    (sys_block / name).symlink_to(device)


def test_block_devices_are_physical_disks_only(tmp_path: Path) -> None:
    sys_block = tmp_path / "block"
    sys_block.mkdir()
    _link(sys_block, "vda", "pci0000:00/virtio1/block")
    _link(sys_block, "nvme0n1", "pci0000:00/nvme/nvme0")
    for name in ("loop0", "zram0", "dm-0", "md0"):
        _link(sys_block, name, "virtual/block")
    assert block_devices(sys_block) == {"vda", "nvme0n1"}


def test_block_devices_without_a_physical_disk_take_whole_devices_but_loops(tmp_path: Path) -> None:
    sys_block = tmp_path / "block"
    sys_block.mkdir()
    for name in ("loop0", "ram0", "zram0", "dm-0"):
        _link(sys_block, name, "virtual/block")
    assert block_devices(sys_block) == {"dm-0"}
    assert block_devices(tmp_path / "missing") == frozenset()


def test_proc_file_rereads_the_current_content_and_grows_its_buffer(tmp_path: Path) -> None:
    path = tmp_path / "counter"
    path.write_bytes(b"x" * 10)
    proc_file = ProcFile(path, size_hint=4)
    try:
        assert proc_file.read() == b"x" * 10
        path.write_bytes(b"y" * 5000)  # same inode, rewritten in place
        assert proc_file.read() == b"y" * 5000
    finally:
        proc_file.close()


def test_real_proc_agrees_with_psutil() -> None:
    total, available = parse_meminfo(Path("/proc/meminfo").read_bytes())
    memory = psutil.virtual_memory()
    assert total == memory.total
    assert abs(available - memory.available) < 0.05 * total  # read a moment apart
    cores = parse_cpu_times(Path("/proc/stat").read_bytes(), None)
    assert sorted(cores) == sorted(range(psutil.cpu_count() or 0))
    assert set(os.sched_getaffinity(0)) <= set(cores)
    received, sent = parse_net_dev(Path("/proc/net/dev").read_bytes())
    nics = psutil.net_io_counters(pernic=True)
    theirs = sum(c.bytes_recv for n, c in nics.items() if n != "lo")
    assert theirs <= received + 10_000_000 and received <= theirs + 10_000_000
    assert sent >= 0
