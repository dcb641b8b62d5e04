"""The debugger: tensors saved while a job trains, read back while it runs or after.

Public names mirror smdebug's: :mod:`~trainops.debugger.modes`, :class:`SaveConfig`,
:class:`ReductionConfig`, :class:`Collection`, :class:`CollectionKeys`, the hook's JSON
(:class:`HookConfig`, :func:`load_hook_config`), and the reader (:func:`create_trial`,
:class:`Trial`, :class:`Tensor`, :class:`StepState` and the exceptions). The on-disk format and
the job-side writer are in :mod:`trainops.debugger.format`. Names are imported on first use.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.debugger import modes
    from trainops.debugger.config import (
        Collection,
        CollectionKeys,
        CollectionManager,
        HookConfig,
        ReductionConfig,
        SaveConfig,
        SaveConfigMode,
        load_hook_config,
    )
    from trainops.debugger.exceptions import (
        DebugConfigError,
        DebugFormatError,
        MissingCollectionFiles,
        NoMoreData,
        RuleEvaluationConditionMet,
        StepNotYetAvailable,
        StepUnavailable,
        TensorUnavailable,
        TensorUnavailableForStep,
    )
    from trainops.debugger.modes import ModeKeys
    from trainops.debugger.trial import StepState, Tensor, Trial, create_trial, no_refresh, refresh

__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "DebugConfigError",
    "DebugFormatError",
    "HookConfig",
    "MissingCollectionFiles",
    "ModeKeys",
    "NoMoreData",
    "ReductionConfig",
    "RuleEvaluationConditionMet",
    "SaveConfig",
    "SaveConfigMode",
    "StepNotYetAvailable",
    "StepState",
    "StepUnavailable",
    "Tensor",
    "TensorUnavailable",
    "TensorUnavailableForStep",
    "Trial",
    "create_trial",
    "load_hook_config",
    "modes",
    "no_refresh",
    "refresh",
]

_CONFIG = "trainops.debugger.config"
_ERRORS = "trainops.debugger.exceptions"
_TRIAL = "trainops.debugger.trial"
_MODULE_OF = {
    "Collection": _CONFIG,
    "CollectionKeys": _CONFIG,
    "CollectionManager": _CONFIG,
    "DebugConfigError": _ERRORS,
    "DebugFormatError": _ERRORS,
    "HookConfig": _CONFIG,
    "MissingCollectionFiles": _ERRORS,
    "ModeKeys": "trainops.debugger.modes",
    "NoMoreData": _ERRORS,
    "ReductionConfig": _CONFIG,
    "RuleEvaluationConditionMet": _ERRORS,
    "SaveConfig": _CONFIG,
    "SaveConfigMode": _CONFIG,
    "StepNotYetAvailable": _ERRORS,
    "StepState": _TRIAL,
    "StepUnavailable": _ERRORS,
    "Tensor": _TRIAL,
    "TensorUnavailable": _ERRORS,
    "TensorUnavailableForStep": _ERRORS,
    "Trial": _TRIAL,
    "create_trial": _TRIAL,
    "load_hook_config": _CONFIG,
    "modes": "trainops.debugger",
    "no_refresh": _TRIAL,
    "refresh": _TRIAL,
}


def __getattr__(name: str) -> typing.Any:
    if name == "modes":
        import importlib

        return importlib.import_module("trainops.debugger.modes")
    return _getattr(name)


_getattr, __dir__ = lazy_names("trainops.debugger", globals(), _MODULE_OF)
