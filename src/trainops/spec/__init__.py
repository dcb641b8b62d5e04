"""Job specs: the pydantic models of what a user declares, YAML loading and validation.

Every model raises :class:`trainops.SpecError` naming the field (and YAML line) at fault.
Names are imported on first use: reading a spec as plain data (:func:`load_raw_spec`, what the
CLI sends to a server, which validates it) does not import the models or pydantic.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.spec._debugger import (
        DEFAULT_TENSORS_LOCAL_PATH,
        CollectionConfig,
        DebuggerHookConfig,
    )
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
        AccessMode,
        Channel,
        ChaosSpec,
        CheckpointConfig,
        Compression,
        DataType,
        Distribution,
        FileSystemSource,
        FileSystemType,
        InputMode,
        JobSpec,
        MetricDefinition,
        RecordWrapping,
        RetryStrategy,
        StoppingCondition,
        is_channel_name,
    )
    from trainops.spec._load import (
        check_channel_sources,
        load_spec,
        parse_spec,
        resolve_paths,
        validate_spec,
    )
    from trainops.spec._names import (
        JobNamer,
        base_job_name,
        base_name_for,
        check_job_name,
        make_job_name,
    )
    from trainops.spec._profiler import (
        ActionSpecModel,
        DataloaderProfilingConfig,
        DetailedProfilingConfig,
        FrameworkProfile,
        ProfilerConfig,
        PythonProfilingConfig,
        RuleConfig,
        TensorBoardOutputConfig,
        check_rules,
    )
    from trainops.spec._raw import RawSpec, load_raw_spec
    from trainops.spec._rule_catalog import (
        DEBUGGER_RULES,
        PROFILER_REPORT,
        PROFILER_RULES,
        REPORT_MEMBERS,
        RuleDefinition,
        check_rule_parameters,
        rule_definition,
        rule_name,
    )
    from trainops.spec._sagemaker import (
        CHANNEL_ARGUMENTS,
        ESTIMATOR_ARGUMENTS,
        FILE_SYSTEM_ARGUMENTS,
        NO_LOCAL_EFFECT,
        sagemaker_hint,
    )
    from trainops.spec._study import StudyConfiguration, StudySpec, StudyTarget, load_study

__all__ = [
    "CHANNEL_ARGUMENTS",
    "DEBUGGER_RULES",
    "DEFAULT_TENSORS_LOCAL_PATH",
    "ESTIMATOR_ARGUMENTS",
    "FILE_SYSTEM_ARGUMENTS",
    "NO_LOCAL_EFFECT",
    "PROFILER_REPORT",
    "PROFILER_RULES",
    "REPORT_MEMBERS",
    "RESERVED_HYPERPARAMETERS",
    "AccessMode",
    "ActionSpecModel",
    "Channel",
    "ChaosSpec",
    "CheckpointConfig",
    "CollectionConfig",
    "Compression",
    "DataParallelConfig",
    "DataType",
    "DataloaderProfilingConfig",
    "DebuggerHookConfig",
    "DetailedProfilingConfig",
    "Distribution",
    "DistributionConfig",
    "Enabled",
    "FileSystemSource",
    "FileSystemType",
    "FrameworkProfile",
    "InputMode",
    "JobNamer",
    "JobSpec",
    "MetricDefinition",
    "ModelParallelConfig",
    "MpiConfig",
    "ProfilerConfig",
    "PythonProfilingConfig",
    "RawSpec",
    "RecordWrapping",
    "RetryStrategy",
    "RuleConfig",
    "RuleDefinition",
    "SmDistributedConfig",
    "StoppingCondition",
    "StudyConfiguration",
    "StudySpec",
    "StudyTarget",
    "TensorBoardOutputConfig",
    "base_job_name",
    "base_name_for",
    "check_channel_sources",
    "check_job_name",
    "check_rule_parameters",
    "check_rules",
    "is_channel_name",
    "load_raw_spec",
    "load_spec",
    "load_study",
    "make_job_name",
    "parse_spec",
    "resolve_paths",
    "rule_definition",
    "rule_name",
    "sagemaker_hint",
    "validate_spec",
]

_MODULE_OF = {
    **dict.fromkeys(
        ["CollectionConfig", "DEFAULT_TENSORS_LOCAL_PATH", "DebuggerHookConfig"],
        "trainops.spec._debugger",
    ),
    **dict.fromkeys(
        [
            "ActionSpecModel",
            "DataloaderProfilingConfig",
            "DetailedProfilingConfig",
            "FrameworkProfile",
            "ProfilerConfig",
            "PythonProfilingConfig",
            "RuleConfig",
            "TensorBoardOutputConfig",
            "check_rules",
        ],
        "trainops.spec._profiler",
    ),
    **dict.fromkeys(
        [
            "DEBUGGER_RULES",
            "PROFILER_REPORT",
            "PROFILER_RULES",
            "REPORT_MEMBERS",
            "RuleDefinition",
            "check_rule_parameters",
            "rule_definition",
            "rule_name",
        ],
        "trainops.spec._rule_catalog",
    ),
    **dict.fromkeys(
        [
            "DataParallelConfig",
            "DistributionConfig",
            "Enabled",
            "ModelParallelConfig",
            "MpiConfig",
            "SmDistributedConfig",
        ],
        "trainops.spec._distribution",
    ),
    **dict.fromkeys(
        [
            "RESERVED_HYPERPARAMETERS",
            "AccessMode",
            "Channel",
            "ChaosSpec",
            "CheckpointConfig",
            "Compression",
            "DataType",
            "Distribution",
            "FileSystemSource",
            "FileSystemType",
            "InputMode",
            "JobSpec",
            "MetricDefinition",
            "RecordWrapping",
            "RetryStrategy",
            "StoppingCondition",
            "is_channel_name",
        ],
        "trainops.spec._job",
    ),
    **dict.fromkeys(
        ["check_channel_sources", "load_spec", "parse_spec", "resolve_paths", "validate_spec"],
        "trainops.spec._load",
    ),
    **dict.fromkeys(
        ["JobNamer", "base_job_name", "base_name_for", "check_job_name", "make_job_name"],
        "trainops.spec._names",
    ),
    **dict.fromkeys(["RawSpec", "load_raw_spec"], "trainops.spec._raw"),
    **dict.fromkeys(
        [
            "CHANNEL_ARGUMENTS",
            "ESTIMATOR_ARGUMENTS",
            "FILE_SYSTEM_ARGUMENTS",
            "NO_LOCAL_EFFECT",
            "sagemaker_hint",
        ],
        "trainops.spec._sagemaker",
    ),
    **dict.fromkeys(
        ["StudyConfiguration", "StudySpec", "StudyTarget", "load_study"], "trainops.spec._study"
    ),
}


__getattr__, __dir__ = lazy_names("trainops.spec", globals(), _MODULE_OF)
