"""A registered model: the module the script calls, the one that holds the parameters, names.

The script may register a wrapper: ``torch.compile``'s ``OptimizedModule``, DDP or
``DataParallel``. The hook names tensors after the wrapped model (``Net_fc1.weight``, not
``DistributedDataParallel_module.fc1.weight``), so a rule finds the same names however the
model was run, and it hooks the step on the wrapper, which runs outside any compiled graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from trainops.debugger.config import CollectionManager
from trainops.debugger.hook._names import (
    ACTIVATION_TYPES,
    INPUT_SUFFIX,
    OUTPUT_SUFFIX,
    gradient_name,
    io_name,
    parameter_name,
)
from trainops.debugger.hook._plan import SavePlan

__all__ = ["Model", "unwrap"]

_WRAPPERS = ("DistributedDataParallel", "DataParallel", "FullyShardedDataParallel")


def unwrap(module: Any) -> tuple[Any, bool]:
    """The model inside ``module`` and whether it is compiled."""
    compiled = False
    for _ in range(8):
        if hasattr(module, "_orig_mod") and type(module).__name__ == "OptimizedModule":
            module, compiled = module._orig_mod, True
        elif type(module).__name__ in _WRAPPERS and hasattr(module, "module"):
            module = module.module
        else:
            break
    return module, compiled


class Model:
    """One registered model (see the module docstring)."""

    def __init__(self, outer: Any, inner: Any, compiled: bool) -> None:
        self.outer, self.inner, self.compiled = outer, inner, compiled
        self.class_name: str = type(inner).__name__
        self._parameters = [
            (parameter_name(self.class_name, path), gradient_name(self.class_name, path), p)
            for path, p in inner.named_parameters()
        ]

    def modules(self) -> Iterator[tuple[str, Any]]:
        """``(name, module)`` for the model (named by its class) and every submodule (by path)."""
        for path, sub in self.inner.named_modules():
            yield path or self.class_name, sub

    def parameters(self) -> list[tuple[str, str, Any]]:
        """``(tensor name, gradient name, parameter)`` of each parameter."""
        return self._parameters

    def attach_io(self, plan: SavePlan, hook: Callable[..., None]) -> list[str]:
        """Forward hooks on the modules whose inputs or outputs a collection wants; returns the
        names of those a compiled graph hides."""
        hidden: list[str] = []
        for name, sub in self.modules():
            first = (io_name(name, INPUT_SUFFIX, 0), io_name(name, OUTPUT_SUFFIX, 0))
            if not any(plan.wants(tensor) for tensor in first):
                continue
            if self.compiled and sub is not self.inner:
                hidden += [t for t in first if plan.wants(t)]
                continue
            (self.outer if sub is self.inner else sub).register_forward_hook(hook)
        return hidden

    def add_type_collections(self, manager: CollectionManager) -> None:
        """A collection named ``<type>_input`` / ``<type>_output`` (``relu_output``) gathers
        the inputs / outputs of this model's modules of that type."""
        for collection_name, collection in manager.get_collections().items():
            kind = collection_name.rsplit("_", 1)
            if (
                len(kind) != 2
                or kind[0] not in ACTIVATION_TYPES
                or kind[1] not in ("input", "output")
            ):
                continue
            for name, sub in self.modules():
                if type(sub).__name__.lower() == kind[0]:
                    collection.include(f"^{re.escape(name)}_{kind[1]}_\\d+$")
