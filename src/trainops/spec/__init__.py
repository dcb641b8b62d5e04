"""Job specs: the pydantic models of what a user declares, YAML loading and validation.

Every model raises :class:`trainops.SpecError` naming the field (and YAML line) at fault.
"""

from trainops.spec._job import (
    RESERVED_HYPERPARAMETERS,
    Channel,
    CheckpointConfig,
    Distribution,
    InputMode,
    JobSpec,
    MetricDefinition,
    RetryStrategy,
    StoppingCondition,
)
from trainops.spec._load import load_spec, parse_spec, resolve_paths
from trainops.spec._names import check_job_name, make_job_name

__all__ = [
    "RESERVED_HYPERPARAMETERS",
    "Channel",
    "CheckpointConfig",
    "Distribution",
    "InputMode",
    "JobSpec",
    "MetricDefinition",
    "RetryStrategy",
    "StoppingCondition",
    "check_job_name",
    "load_spec",
    "make_job_name",
    "parse_spec",
    "resolve_paths",
]
