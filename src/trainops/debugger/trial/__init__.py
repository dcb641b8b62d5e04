"""Reading saved tensors back: :func:`create_trial`, :class:`Trial`, :class:`Tensor`.

The API is smdebug's trial API (``tensor_names``, ``tensor(name).value(step, mode)``,
``steps``, ``wait_for_steps``, ``has_passed_step`` ...); a trial reads a directory or any
storage prefix while the job writes it, and bounds every read of the job's files.
"""

from __future__ import annotations

from trainops.debugger.trial._create import create_trial
from trainops.debugger.trial._source import LocalSource, StorageSource, TrialSource
from trainops.debugger.trial._state import StepState
from trainops.debugger.trial._tensor import Tensor
from trainops.debugger.trial._trial import Trial, TrialLimits, no_refresh, refresh

__all__ = [
    "LocalSource",
    "StepState",
    "StorageSource",
    "Tensor",
    "Trial",
    "TrialLimits",
    "TrialSource",
    "create_trial",
    "no_refresh",
    "refresh",
]
