"""Per-GPU utilization and memory through NVML (``nvidia-ml-py``, the ``nvml`` extra).

:func:`open_gpus` either returns :class:`Gpus` (NVML initialized, handles of the GPUs to watch)
or a one-line reason why GPU metrics are off: the package is missing, the NVML library cannot
be loaded (no NVIDIA driver), or there is no GPU. Nothing here raises into the monitor: a GPU
that fails one reading reports NaN for that sample.

NVML numbers GPUs in PCI bus order; ``gpu<N>`` columns use NVML's index N.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["GpuInfo", "Gpus", "open_gpus"]

MODULE = "pynvml"  # what nvidia-ml-py installs
INSTALL_HINT = "pip install 'trainops[nvml]'"


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU as ``meta/<host>.json`` lists it."""

    index: int
    name: str
    memory_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "memory_bytes": self.memory_bytes}


class Gpus:
    """The GPUs being watched, through an initialized NVML module."""

    def __init__(self, nvml: Any, handles: dict[int, Any], info: list[GpuInfo]) -> None:
        self._nvml = nvml
        self._handles = handles
        self.info = info

    def sample(self) -> dict[int, tuple[float, float, float]]:
        """Per GPU index: (utilization %, memory used %, memory used bytes); NaN where a
        reading failed (the GPU fell off the bus, a driver hiccup)."""
        out: dict[int, tuple[float, float, float]] = {}
        for index, handle in self._handles.items():
            try:
                busy = float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
                used, total = float(memory.used), float(memory.total)
            except Exception:  # pynvml.NVMLError and its many subclasses
                out[index] = (math.nan, math.nan, math.nan)
                continue
            out[index] = (busy, 100.0 * used / total if total else math.nan, used)
        return out

    def close(self) -> None:
        _shutdown(self._nvml)


def open_gpus(indexes: Iterable[int] | None = None) -> Gpus | str:
    """NVML's view of the GPUs ``indexes`` (None: every GPU), or why GPU metrics are off."""
    try:
        nvml = importlib.import_module(MODULE)
    except ImportError:
        return f"off: nvidia-ml-py is not installed ({INSTALL_HINT})"
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return f"off: NVML could not be initialized ({_one_line(exc)}; no NVIDIA driver here?)"
    try:
        count = int(nvml.nvmlDeviceGetCount())
        wanted = range(count) if indexes is None else [i for i in indexes if 0 <= i < count]
        handles = {index: nvml.nvmlDeviceGetHandleByIndex(index) for index in wanted}
        info = [_info(nvml, index, handle) for index, handle in handles.items()]
    except Exception as exc:
        _shutdown(nvml)
        return f"off: NVML failed listing the GPUs ({_one_line(exc)})"
    if not handles:
        _shutdown(nvml)
        return "off: NVML reports no GPU" if count == 0 else "off: none of this host's GPUs"
    return Gpus(nvml, handles, info)


def _info(nvml: Any, index: int, handle: Any) -> GpuInfo:
    name = nvml.nvmlDeviceGetName(handle)
    if isinstance(name, bytes):  # older nvidia-ml-py returns bytes
        name = name.decode("utf-8", "replace")
    total = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
    return GpuInfo(index, str(name), total)


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        return


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
