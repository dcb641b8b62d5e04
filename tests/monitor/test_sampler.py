"""SystemSampler on this host: column names and units, values in range and true to the kernel."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests._support.system import require_extra
from trainops.monitor import SystemSampler
from trainops.profiler import SYSTEM_COLUMNS, UNITS, numbered


def _unit(column: str) -> str:
    for family in ("cpu", "gpu", "gpu_memory", "gpu_memory_bytes"):
        if column in numbered([column], family).values():
            return UNITS[family.replace("gpu", "gpu<N>", 1) if "gpu" in family else "cpu<N>"]
    return UNITS[column]


def test_columns_are_the_contracts_names_with_their_units() -> None:
    with SystemSampler() as sampler:
        columns = sampler.columns
        cores = sorted(os.sched_getaffinity(0))
        assert columns[0] == "time"
        assert set(SYSTEM_COLUMNS) <= set(columns)  # this host has a disk and /proc/net/dev
        assert numbered(columns, "cpu") == {c: f"cpu{c}" for c in cores}
        gpus = 3 * len(sampler.gpu_info)  # gpu<N>, gpu<N>_memory, gpu<N>_memory_bytes
        assert len(columns) == len(set(columns)) == len(SYSTEM_COLUMNS) + len(cores) + gpus
        units = {column: _unit(column) for column in columns}
        assert units["cpu0"] == units["cpu"] == units["iowait"] == units["memory"] == "%"
        assert units["disk_read"] == units["net_tx"] == "B/s"
        assert units["memory_bytes"] == "B"
        time.sleep(0.05)
        values = sampler.sample()
        assert list(values) != [] and set(values) == set(columns)
        assert len(sampler.row()) == len(columns)


def test_values_are_in_range_and_memory_matches_the_kernel() -> None:
    with SystemSampler() as sampler:
        time.sleep(0.2)
        before = time.time()
        values = sampler.sample()
        memory = psutil.virtual_memory()
    assert before <= values["time"] <= time.time()
    for name in ["cpu", "iowait", "memory", *numbered(list(values), "cpu").values()]:
        assert 0.0 <= values[name] <= 100.0, (name, values[name])
    for name in ("disk_read", "disk_write", "net_rx", "net_tx"):
        assert values[name] >= 0.0 and math.isfinite(values[name])
    used = memory.total - memory.available
    assert sampler.memory_total == memory.total
    assert abs(values["memory_bytes"] - used) < 0.05 * memory.total
    assert values["memory"] == pytest.approx(100 * values["memory_bytes"] / memory.total)


def _spin(stop: threading.Event, core: int) -> None:
    os.sched_setaffinity(threading.get_native_id(), {core})
    while not stop.is_set():
        pass


def test_a_busy_thread_shows_on_its_core_and_agrees_with_psutil() -> None:
    core = max(os.sched_getaffinity(0))
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop, core))
    with SystemSampler(cores=[core]) as sampler:
        psutil.cpu_percent(percpu=True)  # psutil's baseline, taken with the sampler's
        spinner.start()
        try:
            time.sleep(0.6)
            values = sampler.sample()
            theirs = psutil.cpu_percent(percpu=True)[core]
        finally:
            stop.set()
            spinner.join()
    assert sampler.columns == ["time", "cpu", f"cpu{core}", *sampler.columns[3:]]
    assert values[f"cpu{core}"] >= 60.0  # the spinner had this core, alone or shared
    assert values["cpu"] == values[f"cpu{core}"]  # one core chosen: the host's cpu is its own
    assert abs(values[f"cpu{core}"] - theirs) <= 10.0  # same jiffies, a moment apart


def test_written_bytes_are_counted(tmp_path: Path) -> None:
    with SystemSampler() as sampler:
        if "disk_write" not in sampler.columns:
            pytest.skip("no block device on this host")
        started = time.monotonic()
        data = os.urandom(1 << 20)
        with open(tmp_path / "blob", "wb") as handle:
            for _ in range(16):
                handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        values = sampler.sample()
        elapsed = time.monotonic() - started
    written = values["disk_write"] * elapsed
    # 16 MiB went to the disk (fsync); more may have, from other processes, never less
    assert written >= 15 * (1 << 20), written


NO_GPU = pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="this machine has a GPU")


@NO_GPU
def test_the_gpu_path_fails_soft_here() -> None:
    """No GPU here (and no driver, and maybe no nvidia-ml-py): no GPU column, and a reason."""
    with SystemSampler() as sampler:
        assert sampler.gpus is None
        assert sampler.gpu_status.startswith("off: ")
        assert not numbered(sampler.columns, "gpu")
        assert not [c for c in sampler.columns if c.startswith("gpu")]
        assert sampler.gpu_info == []
    with SystemSampler(gpus=False) as sampler:
        assert sampler.gpu_status == "off: not asked for"


@NO_GPU
def test_nvidia_ml_py_without_a_driver_fails_soft() -> None:
    """The real package, with no libnvidia-ml to load: NVML's own error, in one line."""
    require_extra("nvml")  # make test installs it: in CI, its absence fails
    with SystemSampler() as sampler:
        assert sampler.gpu_status == (
            "off: NVML could not be initialized (NVMLError_LibraryNotFound: NVML Shared Library "
            "Not Found; no NVIDIA driver here?)"
        )
        assert not [c for c in sampler.columns if c.startswith("gpu")]


@NO_GPU
def test_without_nvidia_ml_py_the_reason_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml: ImportError, as uninstalled
    with SystemSampler() as sampler:
        assert (
            sampler.gpu_status
            == "off: nvidia-ml-py is not installed (pip install 'trainops[nvml]')"
        )
        assert sampler.gpus is None and sampler.gpu_info == []
