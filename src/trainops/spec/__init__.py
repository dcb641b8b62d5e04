"""Job specs: the pydantic models of what a user declares, YAML loading and validation.

Every model raises :class:`trainops.SpecError` naming the field (and YAML line) at fault.
"""

from trainops.spec._distribution import (
    DataParallelConfig,
    DistributionConfig,
    Enabled,
    ModelParallelConfig,
    MpiConfig,
    SmDistributedConfig,
)
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
    is_channel_name,
)
from trainops.spec._load import load_spec, parse_spec, resolve_paths
from trainops.spec._names import JobNamer, base_job_name, check_job_name, make_job_name
from trainops.spec._sagemaker import CHANNEL_ARGUMENTS, ESTIMATOR_ARGUMENTS, sagemaker_hint
from trainops.spec._study import StudyConfiguration, StudySpec, StudyTarget, load_study

__all__ = [
    "CHANNEL_ARGUMENTS",
    "ESTIMATOR_ARGUMENTS",
    "RESERVED_HYPERPARAMETERS",
    "Channel",
    "CheckpointConfig",
    "DataParallelConfig",
    "Distribution",
    "DistributionConfig",
    "Enabled",
    "InputMode",
    "JobNamer",
    "JobSpec",
    "MetricDefinition",
    "ModelParallelConfig",
    "MpiConfig",
    "RetryStrategy",
    "SmDistributedConfig",
    "StoppingCondition",
    "StudyConfiguration",
    "StudySpec",
    "StudyTarget",
    "base_job_name",
    "check_job_name",
    "is_channel_name",
    "load_spec",
    "load_study",
    "make_job_name",
    "parse_spec",
    "resolve_paths",
    "sagemaker_hint",
]
