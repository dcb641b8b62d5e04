"""``smdebug.exceptions``: the trial's exceptions, trainops' own classes."""

from __future__ import annotations

from trainops.debugger.exceptions import (
    MissingCollectionFiles,
    NoMoreData,
    RuleEvaluationConditionMet,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)

__all__ = [
    "MissingCollectionFiles",
    "NoMoreData",
    "RuleEvaluationConditionMet",
    "StepNotYetAvailable",
    "StepUnavailable",
    "TensorUnavailable",
    "TensorUnavailableForStep",
]
