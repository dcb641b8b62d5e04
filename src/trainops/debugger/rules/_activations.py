"""Rules on activation layers: DeadRelu and SaturatedActivation.

An activation tensor is ``(batch, nodes...)``: a node is one position of the trailing
dimensions, its activity the share of the batch's samples where it is active (a ReLU's output
above 0; a tanh's or sigmoid's input inside its unsaturated range). A node is inactive when its
activity is below ``threshold_inactivity`` %, and a layer fires when more than
``threshold_layer`` % of its nodes are inactive.

A layer's tensors are those ``tensor_regex`` matches (from the name's start, as smdebug's), and
where a regex is ``.*<type>_input`` or ``.*<type>_output`` for an activation type of the hook
(the defaults ``.*relu_output``, ``.*tanh_input``), also the tensors of the hook's collection of
that name: it gathers every module of that type whatever its name (``relu1_output_0``), which
the name alone does not match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from trainops.debugger.exceptions import MissingCollectionFiles
from trainops.debugger.hook._names import ACTIVATION_TYPES
from trainops.debugger.rules._base import BuiltinRule, checked_regexes
from trainops.debugger.rules._params import as_float, as_names

__all__ = ["DeadRelu", "SaturatedActivation", "layer_tensors", "type_collections"]

_TYPE_REGEX = re.compile(rf"^\.\*((?:{'|'.join(ACTIVATION_TYPES)})_(?:input|output))$")


def type_collections(regexes: Sequence[str]) -> list[str]:
    """The hook's by-type collections that ``regexes`` name: ``relu_output`` for
    ``.*relu_output``, ``tanh_input`` and ``sigmoid_input`` for ``.*tanh_input|.*sigmoid_input``
    (an alternative that is not of that form adds nothing)."""
    parts = (part for regex in regexes for part in regex.split("|"))
    return list(dict.fromkeys(m.group(1) for m in map(_TYPE_REGEX.match, parts) if m))


def layer_tensors(rule: BuiltinRule, collections: list[str], regexes: list[str]) -> list[str]:
    """The tensors ``regexes`` match, and those of the by-type ``collections`` where the trial
    has a collections file (a trial without one is read by name alone, as before)."""
    try:
        by_type = rule.tensors(collections) if collections else []
    except MissingCollectionFiles:
        by_type = []
    return sorted({*by_type, *rule.tensors([], regexes)})


def _inactive_percent(active: Any, threshold_inactivity: float) -> float:
    """The % of nodes active in fewer than ``threshold_inactivity`` % of the samples."""
    mask = np.asarray(active, dtype=bool)
    if mask.ndim < 2:
        mask = mask.reshape(1, -1)
    per_node = 100.0 * mask.reshape(mask.shape[0], -1).mean(axis=0)
    return (
        100.0
        * float(np.count_nonzero(per_node < threshold_inactivity))
        / max(int(per_node.size), 1)
    )


class _ActivationRule(BuiltinRule):
    def _layers(self, tensor_regex: Any, inactivity: Any, layer: Any) -> None:
        regexes = as_names(self.name, "tensor_regex", tensor_regex)
        self.regexes = checked_regexes(self.name, "tensor_regex", regexes)
        self.collections = type_collections(self.regexes)
        self.threshold_inactivity = as_float(self.name, "threshold_inactivity", inactivity)
        self.threshold_layer = as_float(self.name, "threshold_layer", layer)

    def layers(self) -> list[str]:
        return layer_tensors(self, self.collections, self.regexes)

    def _judge(self, tensor: str, step: int, active: Any, what: str) -> bool:
        inactive = _inactive_percent(active, self.threshold_inactivity)
        if inactive <= self.threshold_layer:
            return False
        return self.found(
            f"{inactive:.3g} % of the nodes of {tensor} are {what} at step {step} "
            f"(threshold_layer {self.threshold_layer:g} %)",
            tensor=tensor,
            step=step,
            inactive_percent=inactive,
        )


class DeadRelu(_ActivationRule):
    """Fires when more than ``threshold_layer`` % of a ReLU layer's nodes are dead: their
    output is above 0 in fewer than ``threshold_inactivity`` % of the samples."""

    name = "DeadRelu"

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: Any = ".*relu_output",
        threshold_inactivity: Any = 1.0,
        threshold_layer: Any = 50.0,
    ) -> None:
        super().__init__(base_trial)
        self._layers(tensor_regex, threshold_inactivity, threshold_layer)

    def invoke_at_step(self, step: int) -> bool:
        for tensor in self.layers():
            value = self.value(tensor, step)
            if value is not None and value.size and self._judge(tensor, step, value > 0, "dead"):
                return True
        return False


class SaturatedActivation(_ActivationRule):
    """Fires when more than ``threshold_layer`` % of a tanh or sigmoid layer's nodes are
    saturated: their input is inside the unsaturated range (``threshold_tanh_min`` ..
    ``threshold_tanh_max``, ``threshold_sigmoid_min`` .. ``threshold_sigmoid_max``) in fewer
    than ``threshold_inactivity`` % of the samples. A tensor whose name holds ``sigmoid``, or of
    the hook's ``sigmoid_input`` collection, uses the sigmoid's range, any other the tanh's."""

    name = "SaturatedActivation"

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: Any = ".*tanh_input|.*sigmoid_input",
        threshold_tanh_min: Any = -9.4999,
        threshold_tanh_max: Any = 9.4999,
        threshold_sigmoid_min: Any = -23,
        threshold_sigmoid_max: Any = 16.99999,
        threshold_inactivity: Any = 1.0,
        threshold_layer: Any = 50.0,
    ) -> None:
        super().__init__(base_trial)
        self._layers(tensor_regex, threshold_inactivity, threshold_layer)
        self.tanh = (
            as_float(self.name, "threshold_tanh_min", threshold_tanh_min),
            as_float(self.name, "threshold_tanh_max", threshold_tanh_max),
        )
        self.sigmoid = (
            as_float(self.name, "threshold_sigmoid_min", threshold_sigmoid_min),
            as_float(self.name, "threshold_sigmoid_max", threshold_sigmoid_max),
        )

    def invoke_at_step(self, step: int) -> bool:
        sigmoids = set(layer_tensors(self, ["sigmoid_input"], []))  # the hook's, by module type
        for tensor in self.layers():
            value = self.value(tensor, step)
            if value is None or not value.size:
                continue
            sigmoid = "sigmoid" in tensor or tensor in sigmoids
            low, high = self.sigmoid if sigmoid else self.tanh
            if self._judge(tensor, step, (value > low) & (value < high), "saturated"):
                return True
        return False
