"""Helpers for the tuning tests: a valid tuning job's fields, and a config made from them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests._support.system import require_extra
from trainops.tuning import TuningJobConfig

BASE: dict[str, Any] = {
    "tuning_job_name": "tune-test",
    "training_job": {
        "entry_point": "train.py",
        "hyperparameters": {"epochs": 9, "seed": 1},
        "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}],
    },
    "strategy": "Random",
    "objective": {"metric_name": "loss", "type": "Minimize"},
    "hyperparameter_ranges": {
        "lr": {
            "type": "Continuous",
            "min_value": 1e-4,
            "max_value": 0.1,
            "scaling_type": "Logarithmic",
        },
        "batch_size": {"type": "Integer", "min_value": 16, "max_value": 128},
        "optimizer": ["sgd", "adam"],
    },
    "resource_limits": {"max_number_of_training_jobs": 20, "max_parallel_training_jobs": 2},
    "random_seed": 7,
}


def fields(**changes: Any) -> dict[str, Any]:
    """The valid fields of :data:`BASE` with ``changes`` (a value of ``None`` drops a field)."""
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def make_config(**changes: Any) -> TuningJobConfig:
    """A :class:`TuningJobConfig` of :func:`fields`."""
    return TuningJobConfig(**fields(**changes))


@pytest.fixture
def optuna() -> Any:
    """Optuna (the tuning extra): skipped here without it, failed in CI."""
    return require_extra("tuning")
