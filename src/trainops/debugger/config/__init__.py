"""The debugger's configuration: save schedules, reductions, collections and the hook's JSON.

:class:`SaveConfig` / :class:`SaveConfigMode` say which steps are saved, :class:`ReductionConfig`
what is saved of a tensor, :class:`Collection` / :class:`CollectionManager` which tensors belong
together, and :class:`HookConfig` (:func:`load_hook_config`) is ``debughookconfig.json``.
"""

from __future__ import annotations

from trainops.debugger.config._collection import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    Collection,
    CollectionKeys,
    CollectionManager,
)
from trainops.debugger.config._hook_config import (
    CONFIG_FILE_ENV,
    DEFAULT_CONFIG_FILE,
    DEFAULT_LOCAL_PATH,
    CollectionConfiguration,
    HookConfig,
    load_hook_config,
)
from trainops.debugger.config._reduction_config import (
    ALLOWED_NORMS,
    ALLOWED_REDUCTIONS,
    ReductionConfig,
)
from trainops.debugger.config._save_config import DEFAULT_SAVE_INTERVAL, SaveConfig, SaveConfigMode

__all__ = [
    "ALLOWED_NORMS",
    "ALLOWED_REDUCTIONS",
    "CONFIG_FILE_ENV",
    "DEFAULT_CONFIG_FILE",
    "DEFAULT_LOCAL_PATH",
    "DEFAULT_SAVE_INTERVAL",
    "NON_HISTOGRAM_COLLECTIONS",
    "NON_REDUCTION_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "Collection",
    "CollectionConfiguration",
    "CollectionKeys",
    "CollectionManager",
    "HookConfig",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "load_hook_config",
]
