"""Debugger rules: smdebug's custom-rule base and SageMaker's built-in debugger rules.

:class:`Rule` is ``smdebug.rules.Rule``: subclass it, implement ``invoke_at_step(step)`` over
``self.base_trial`` (a :func:`trainops.debugger.create_trial`), and run it with
:func:`invoke_rule`. The built-in rules (:data:`DEBUGGER_RULES`, reference/sagemaker.md §5.6)
are such classes, made by name with :func:`make_debugger_rule`; the control plane evaluates a
job's rules live with :class:`RuleRunner` (``trainops.rules``). docs/debugger.md describes
them; docs/internals/debugger-rules.md says how to add one.
"""

from __future__ import annotations

from trainops.debugger.rules._activations import DeadRelu, SaturatedActivation
from trainops.debugger.rules._base import BuiltinRule, Rule
from trainops.debugger.rules._classes import ClassImbalance, Confusion
from trainops.debugger.rules._inputs import CheckInputImages, NLPSequenceRatio, StalledTrainingRule
from trainops.debugger.rules._invoker import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    NOTHING_EVALUATED,
    RuleRunner,
    Verdict,
    invoke_rule,
)
from trainops.debugger.rules._losses import LossNotDecreasing, Overfit, Overtraining
from trainops.debugger.rules._registry import DEBUGGER_RULES, make_debugger_rule, rule_parameters
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

__all__ = [
    "DEBUGGER_RULES",
    "IN_PROGRESS",
    "ISSUES_FOUND",
    "NOTHING_EVALUATED",
    "NO_ISSUES_FOUND",
    "AllZero",
    "BuiltinRule",
    "CheckInputImages",
    "ClassImbalance",
    "Confusion",
    "DeadRelu",
    "ExplodingTensor",
    "LossNotDecreasing",
    "NLPSequenceRatio",
    "Overfit",
    "Overtraining",
    "PoorWeightInitialization",
    "Rule",
    "RuleRunner",
    "SaturatedActivation",
    "SimilarAcrossRuns",
    "StalledTrainingRule",
    "TensorVariance",
    "UnchangedTensor",
    "VanishingGradient",
    "Verdict",
    "WeightUpdateRatio",
    "invoke_rule",
    "make_debugger_rule",
    "rule_parameters",
]
