"""The NVML mapping, against a small fake ``pynvml`` put on sys.path by these tests only.

No GPU machine was available where this was written: the calls below are the ones nvidia-ml-py
documents (nvmlInit, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex, nvmlDeviceGetName,
nvmlDeviceGetUtilizationRates().gpu, nvmlDeviceGetMemoryInfo().used/.total, nvmlShutdown), and
these tests check only how the sampler maps their answers to columns and meta; the real NVML
path is unverified here. The fail-soft path without nvidia-ml-py is real (test_sampler.py).
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops.monitor import SystemSampler, open_gpus

FAKE = '''
"""A fake pynvml: GPUS lists (name, utilization, used, total) per device; FAIL_INIT and
BROKEN (indexes whose readings raise) make it fail the way NVML does."""
from types import SimpleNamespace

GPUS = []
FAIL_INIT = None
BROKEN = set()
calls = []


class NVMLError(Exception):
    pass


def nvmlInit():
    calls.append("init")
    if FAIL_INIT:
        raise NVMLError(FAIL_INIT)


def nvmlShutdown():
    calls.append("shutdown")


def nvmlDeviceGetCount():
    return len(GPUS)


def nvmlDeviceGetHandleByIndex(index):
    if not 0 <= index < len(GPUS):
        raise NVMLError("Invalid Argument")
    return ("handle", index)


def nvmlDeviceGetName(handle):
    return GPUS[handle[1]][0]


def nvmlDeviceGetUtilizationRates(handle):
    if handle[1] in BROKEN:
        raise NVMLError("GPU is lost")
    return SimpleNamespace(gpu=GPUS[handle[1]][1], memory=0)


def nvmlDeviceGetMemoryInfo(handle):
    name, busy, used, total = GPUS[handle[1]]
    return SimpleNamespace(used=used, total=total, free=total - used)
'''


@pytest.fixture
def fake_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    (tmp_path / "pynvml.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("pynvml", None)
    yield importlib.import_module("pynvml")
    sys.modules.pop("pynvml", None)


GIB = 1 << 30


def test_gpus_map_to_numbered_columns_and_meta(fake_nvml: Any) -> None:
    fake_nvml.GPUS = [
        ("NVIDIA H100 80GB HBM3", 37, 20 * GIB, 80 * GIB),
        (b"Tesla T4", 90, GIB, 16 * GIB),
    ]
    with SystemSampler() as sampler:
        assert sampler.gpu_status == "nvml"
        assert sampler.gpu_info == [
            {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 80 * GIB},
            {"index": 1, "name": "Tesla T4", "memory_bytes": 16 * GIB},  # bytes names decoded
        ]
        gpu_columns = [c for c in sampler.columns if c.startswith("gpu")]
        assert gpu_columns == [
            "gpu0", "gpu0_memory", "gpu0_memory_bytes", "gpu1", "gpu1_memory", "gpu1_memory_bytes",
        ]  # fmt: skip
        values = sampler.sample()
    assert values["gpu0"] == 37.0 and values["gpu1"] == 90.0
    assert values["gpu0_memory"] == 25.0 and values["gpu1_memory"] == 6.25
    assert values["gpu0_memory_bytes"] == 20 * GIB
    assert fake_nvml.calls[0] == "init" and fake_nvml.calls[-1] == "shutdown"


def test_only_the_hosts_gpus_are_watched(fake_nvml: Any) -> None:
    fake_nvml.GPUS = [("A", 1, 1, 2), ("B", 2, 1, 2), ("C", 3, 1, 2)]
    with SystemSampler(gpus=[2, 7]) as sampler:
        assert [g["index"] for g in sampler.gpu_info] == [2]
        assert sampler.sample()["gpu2"] == 3.0
    assert open_gpus([7]) == "off: none of this host's GPUs"


def test_a_failing_reading_is_nan_for_that_gpu_only(fake_nvml: Any) -> None:
    fake_nvml.GPUS = [("A", 50, 1, 4), ("B", 60, 2, 4)]
    fake_nvml.BROKEN = {0}
    with SystemSampler() as sampler:
        values = sampler.sample()
    assert math.isnan(values["gpu0"]) and math.isnan(values["gpu0_memory_bytes"])
    assert values["gpu1"] == 60.0 and values["gpu1_memory"] == 50.0


def test_nvml_that_cannot_start_or_has_no_gpu_says_why(fake_nvml: Any) -> None:
    fake_nvml.FAIL_INIT = "NVML Shared Library Not Found"
    with SystemSampler() as sampler:
        assert sampler.gpu_status == (
            "off: NVML could not be initialized (NVMLError: NVML Shared Library Not Found; "
            "no NVIDIA driver here?)"
        )
        assert not [c for c in sampler.columns if c.startswith("gpu")]
    fake_nvml.FAIL_INIT = None
    fake_nvml.GPUS = []
    assert open_gpus() == "off: NVML reports no GPU"
    assert fake_nvml.calls[-1] == "shutdown"
