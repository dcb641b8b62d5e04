"""One step's tensors, gathered on their device and moved to the host once when the step ends.

:meth:`StepBuffer.add` computes a tensor's reductions at once, on the tensor's own device (a
0-d tensor each, queued without a sync), and keeps a copy of the raw tensor only where a
collection asks for it. :meth:`StepBuffer.drain` stacks every reduction into one tensor and
concatenates the raw tensors of each dtype into one, so the step costs one device-to-host copy
per dtype plus one for all reductions, then splits them back into named NumPy arrays.

With ``summaries`` on (the hook exports to TensorBoard), the buffer also says what TensorBoard
gets (:class:`Summaries`): the histogram of each tensor one of whose collections has
``save_histogram`` (tag ``<collection>/<tensor>``, the first such collection by name; the raw
tensor is then kept for it even where only reductions are saved), a scalar of each one-value
tensor of a scalar collection (``losses``) and of each reduction, all made into host arrays
with the rest; the writer's thread computes the histograms.

Variance and standard deviation are the population ones (``correction=0``), as NumPy's and
:func:`trainops.debugger.format.compute_reduction`'s, so a reduction does not depend on where
it was computed. ``bfloat16`` tensors are saved as ``float32`` (NumPy has no bfloat16).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainops.debugger.config import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    Collection,
)
from trainops.debugger.format import reduction_tensor_name

__all__ = ["StepBuffer", "Summaries", "reduce"]


@dataclass(slots=True)
class Summaries:
    """What one step gives TensorBoard: ``(tag, host array)`` histograms, ``(tag, value)``
    scalars."""

    histograms: list[tuple[str, np.ndarray]] = field(default_factory=list)
    scalars: list[tuple[str, float]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.histograms or self.scalars)


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

    def __init__(self, torch: Any, summaries: bool = False) -> None:
        self._torch = torch
        self.summaries = summaries
        self._reduced: dict[str, Any] = {}
        self._raw: dict[str, Any] = {}
        self._host: dict[str, np.ndarray] = {}
        self._histograms: dict[str, str] = {}  # tensor name -> histogram tag
        self._scalars: set[str] = set()  # tensors (raw or host) shown as scalars
        self._unsaved: set[str] = set()  # raw tensors kept for their histogram only

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
        if self.summaries:
            self._summarize(name, tensor, collections)
        if raw or name in self._histograms:
            self._raw[name] = tensor.clone()
            if not raw:
                self._unsaved.add(name)

    def _summarize(self, name: str, tensor: Any, collections: Iterable[Collection]) -> None:
        """Note what TensorBoard shows of ``name``: a scalar (a scalar collection's one value;
        those are saved raw), a histogram (the first collection by name that wants one)."""
        chosen = sorted(collections, key=lambda c: c.name)
        if any(c.name in SCALAR_COLLECTIONS for c in chosen) and tensor.numel() == 1:
            self._scalars.add(name)
        if (
            tensor.dtype != self._torch.bool
            and not tensor.is_complex()
            and name not in self._histograms
        ):
            for collection in chosen:
                if collection.save_histogram and collection.name not in NON_HISTOGRAM_COLLECTIONS:
                    self._histograms[name] = f"{collection.name}/{name}"
                    break

    def add_host(self, name: str, value: np.ndarray, scalar: bool = False) -> None:
        """Queue a value already on the host (a scalar, a tensor from ``save_tensor``);
        ``scalar``: TensorBoard shows it as one."""
        self._host[name] = value
        if scalar and self.summaries:
            self._scalars.add(name)

    def drain(self) -> tuple[list[tuple[str, np.ndarray]], Summaries]:
        """Every queued tensor as a host array (those to save), what TensorBoard gets, and an
        empty buffer."""
        reduced = self._drain_reduced()
        raw = self._drain_raw()
        out = list(self._host.items()) + reduced
        out += [(name, array) for name, array in raw if name not in self._unsaved]
        summaries = Summaries()
        if self.summaries:
            shown = reduced + [(n, a) for n, a in [*self._host.items(), *raw] if n in self._scalars]
            summaries.scalars = [(n, v) for n, a in shown if (v := _number(a)) is not None]
            summaries.histograms = [
                (self._histograms[n], a) for n, a in raw if n in self._histograms
            ]
        self._reduced, self._raw, self._host = {}, {}, {}
        self._histograms, self._scalars, self._unsaved = {}, set(), set()
        return out, summaries

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


def _number(array: np.ndarray) -> float | None:
    """The one real value of ``array`` as a float (None for strings, complex numbers, ...)."""
    if array.size != 1 or array.dtype.kind not in "biuf":
        return None
    return float(array.reshape(-1)[0])
