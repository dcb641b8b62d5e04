"""trainops: run, scale, watch and tune training jobs with the SageMaker training contract.

The public surface is this module's ``__all__``. Everything but the errors is imported on first
use (the spec models pull in pydantic, the client httpx), so that ``import trainops`` stays cheap
for host agents and training scripts.
"""

from __future__ import annotations

import typing as _typing

from trainops._errors import (
    ArchiveError,
    ConfigError,
    JobNotFoundError,
    ServerError,
    SpecError,
    StorageError,
    TrainopsError,
    UnexpectedStatusError,
)
from trainops._version import __version__

if _typing.TYPE_CHECKING:
    from trainops.client import Client, connect
    from trainops.sdk import HyperparameterTuner, TrainingJob
    from trainops.spec import (
        Channel,
        CheckpointConfig,
        JobSpec,
        MetricDefinition,
        RetryStrategy,
        StoppingCondition,
        load_spec,
    )

__all__ = [
    "ArchiveError",
    "Channel",
    "CheckpointConfig",
    "Client",
    "ConfigError",
    "HyperparameterTuner",
    "JobNotFoundError",
    "JobSpec",
    "MetricDefinition",
    "RetryStrategy",
    "ServerError",
    "SpecError",
    "StoppingCondition",
    "StorageError",
    "TrainingJob",
    "TrainopsError",
    "UnexpectedStatusError",
    "__version__",
    "connect",
    "load_spec",
]

_LAZY = {
    "Client": "trainops.client",
    "connect": "trainops.client",
    "HyperparameterTuner": "trainops.sdk",
    "TrainingJob": "trainops.sdk",
    **dict.fromkeys(
        [
            "Channel",
            "CheckpointConfig",
            "JobSpec",
            "MetricDefinition",
            "RetryStrategy",
            "StoppingCondition",
            "load_spec",
        ],
        "trainops.spec",
    ),
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'trainops' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
