"""One step's tensors, gathered on their device and moved to the host once when the step ends.

:meth:`StepBuffer.add` computes a tensor's reductions at once, on the tensor's own device (a
0-d tensor each, queued without a sync), and keeps a copy of the raw tensor only where a
collection asks for it. :meth:`StepBuffer.drain` stacks every reduction into one tensor and
concatenates the raw tensors of each dtype into one, so the step costs one device-to-host copy
per dtype plus one for all reductions, then splits them back into named NumPy arrays.

Variance and standard deviation are the population ones (``correction=0``), as NumPy's and
:func:`trainops.debugger.format.compute_reduction`'s, so a reduction does not depend on where
it was computed. ``bfloat16`` tensors are saved as ``float32`` (NumPy has no bfloat16).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from trainops.debugger.config import NON_REDUCTION_COLLECTIONS, Collection
from trainops.debugger.format import reduction_tensor_name

__all__ = ["StepBuffer", "reduce"]


def reduce(torch: Any, tensor: Any, name: str, absolute: bool) -> Any:
    """``name`` (a reduction or norm) of ``tensor`` as a 0-d tensor on its device."""
    if not (tensor.is_floating_point() or tensor.is_complex()):
        tensor = tensor.to(torch.float64 if tensor.device.type != "mps" else torch.float32)
    if absolute:
        tensor = tensor.abs()
    if name in ("l1", "l2"):
        return torch.linalg.vector_norm(tensor, ord=int(name[1]))
    if name == "variance":
        return tensor.var(correction=0)
    if name == "std":
        return tensor.std(correction=0)
    return getattr(tensor, name)()


class StepBuffer:
    """The tensors of the step in progress (see the module docstring)."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._reduced: dict[str, Any] = {}
        self._raw: dict[str, Any] = {}
        self._host: dict[str, np.ndarray] = {}

    def __bool__(self) -> bool:
        return bool(self._reduced or self._raw or self._host)

    def add(self, name: str, tensor: Any, collections: Iterable[Collection]) -> None:
        """Queue ``tensor`` (a torch tensor) as its collections say: reductions and/or raw."""
        tensor = tensor.detach()
        if tensor.numel() == 0:
            return
        raw = False
        for collection in collections:
            config = collection.reduction_config
            if collection.name in NON_REDUCTION_COLLECTIONS or config is None:
                raw = True
                continue
            raw = raw or config.save_raw_tensor
            for reduction, absolute in config.reduction_list:
                key = reduction_tensor_name(name, reduction, absolute)
                if key not in self._reduced:
                    self._reduced[key] = reduce(self._torch, tensor, reduction, absolute)
        if raw:
            self._raw[name] = tensor.clone()

    def add_host(self, name: str, value: np.ndarray) -> None:
        """Queue a value already on the host (a scalar, a tensor from ``save_tensor``)."""
        self._host[name] = value

    def drain(self) -> list[tuple[str, np.ndarray]]:
        """Every queued tensor as a host array, and an empty buffer."""
        out = list(self._host.items())
        out += self._drain_reduced()
        out += self._drain_raw()
        self._reduced, self._raw, self._host = {}, {}, {}
        return out

    def _drain_reduced(self) -> list[tuple[str, np.ndarray]]:
        if not self._reduced:
            return []
        torch = self._torch
        values = list(self._reduced.values())
        dtype = torch.float32 if values[0].device.type == "mps" else torch.float64
        stacked = torch.stack([v.real.to(dtype) for v in values]).cpu().numpy()
        return [(name, stacked[i]) for i, name in enumerate(self._reduced)]

    def _drain_raw(self) -> list[tuple[str, np.ndarray]]:
        groups: dict[tuple[Any, Any], list[tuple[str, Any]]] = {}
        for name, tensor in self._raw.items():
            if tensor.dtype == self._torch.bfloat16:
                tensor = tensor.float()
            groups.setdefault((tensor.dtype, tensor.device), []).append((name, tensor))
        out: list[tuple[str, np.ndarray]] = []
        for members in groups.values():
            flat = self._torch.cat([t.reshape(-1) for _, t in members]).cpu().numpy()
            offset = 0
            for name, tensor in members:
                size = tensor.numel()
                out.append((name, flat[offset : offset + size].reshape(tuple(tensor.shape))))
                offset += size
        return out
