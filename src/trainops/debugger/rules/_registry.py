"""The registry of built-in debugger rules: name -> class (the catalog's debugger rules,
``trainops.spec``; the conformance suite checks that the two agree)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainops._registry import Registry
from trainops.debugger.rules._activations import DeadRelu, SaturatedActivation
from trainops.debugger.rules._base import BuiltinRule
from trainops.debugger.rules._classes import ClassImbalance, Confusion
from trainops.debugger.rules._inputs import CheckInputImages, NLPSequenceRatio, StalledTrainingRule
from trainops.debugger.rules._losses import LossNotDecreasing, Overfit, Overtraining
from trainops.debugger.rules._tensors import (
    AllZero,
    ExplodingTensor,
    SimilarAcrossRuns,
    TensorVariance,
    UnchangedTensor,
)
from trainops.debugger.rules._training import (
    PoorWeightInitialization,
    VanishingGradient,
    WeightUpdateRatio,
)

__all__ = ["DEBUGGER_RULES", "make_debugger_rule"]

DEBUGGER_RULES: Registry[type[BuiltinRule]] = Registry("debugger rule", error=KeyError)
for _rule in (
    VanishingGradient,
    ExplodingTensor,
    AllZero,
    UnchangedTensor,
    LossNotDecreasing,
    Overfit,
    Overtraining,
    PoorWeightInitialization,
    SaturatedActivation,
    DeadRelu,
    WeightUpdateRatio,
    TensorVariance,
    ClassImbalance,
    Confusion,
    CheckInputImages,
    NLPSequenceRatio,
    StalledTrainingRule,
    SimilarAcrossRuns,
):
    DEBUGGER_RULES.register(_rule.name, _rule)


def make_debugger_rule(
    name: str,
    base_trial: Any,
    parameters: Mapping[str, Any] | None = None,
    other_trials: list[Any] | None = None,
) -> BuiltinRule:
    """The built-in rule ``name`` on ``base_trial`` with ``parameters`` (those the rule does
    not take, such as ``scan_interval_us``, are refused; a ValueError names the parameter)."""
    cls = DEBUGGER_RULES.lookup(name)
    given = dict(parameters or {})
    known = rule_parameters(cls)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(
            f"{name} has no parameter {unknown[0]!r}; its parameters: {', '.join(known)}"
        )
    if "other_trials" in known:
        given["other_trials"] = other_trials
    return cls(base_trial, **given)


def rule_parameters(cls: type[BuiltinRule]) -> dict[str, Any]:
    """A built-in rule's parameters and their defaults, from its constructor."""
    import inspect

    signature = inspect.signature(cls.__init__)
    return {
        p.name: p.default
        for p in signature.parameters.values()
        if p.name not in ("self", "base_trial") and p.default is not inspect.Parameter.empty
    }
