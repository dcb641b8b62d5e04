"""The host agent: ``python -m trainops.agent`` runs one host of a job.

It fetches its :class:`~trainops.protocol.Assignment`, builds the host's /opt/ml-shaped tree and
the SageMaker training toolkit's environment, runs the entry point, scrapes metrics from its
output, keeps checkpoints and intermediate outputs in object storage, uploads the model and
outputs, and reports every step to the control plane through a :class:`Reporter`. Importing this
package starts nothing and imports nothing of the agent: each exported name is imported on
first use, so that the control plane, which only needs ``trainops.agent.launchers``, does not
pay for the whole agent.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
    from trainops.agent._agent import HostAgent, HostResult
    from trainops.agent._client import AgentApiError, AgentClient, fetch_assignment
    from trainops.agent._entry_point import (
        EntryPointKind,
        entry_point_command,
        entry_point_kind,
        module_name,
    )
    from trainops.agent._environment import (
        HostContext,
        build_environment,
        count_machine_gpus,
        sm_variables,
        training_env,
    )
    from trainops.agent._failure import (
        called_process_error,
        exit_failure_reason,
        read_failure_file,
        stderr_excerpt,
    )
    from trainops.agent._hostlog import HostLog
    from trainops.agent._hyperparameters import (
        SAGEMAKER_HYPERPARAMETERS,
        decode_hyperparameters,
        encode_hyperparameters,
        split_hyperparameters,
        to_cmd_args,
        to_env_vars,
    )
    from trainops.agent._installer import (
        InstallModuleError,
        InstallRequirementsError,
        JobFailure,
        JobInstaller,
    )
    from trainops.agent._metrics import MetricScraper
    from trainops.agent._outputs import Artifact, OutputLayout, upload_archives, upload_log
    from trainops.agent._process import ScriptProcess
    from trainops.agent._reporter import EventJournal, HttpReporter, Reporter
    from trainops.agent._resources import capacity_warnings, pin_cpus
    from trainops.agent._sync import DirectorySync, SyncResult
    from trainops.agent._tree import HostTree, input_data_config, resource_config
    from trainops.agent.channels import ProgressLine, assign_objects, download_channel

__all__ = [
    "SAGEMAKER_HYPERPARAMETERS",
    "AgentApiError",
    "AgentClient",
    "Artifact",
    "DirectorySync",
    "EntryPointKind",
    "EventJournal",
    "HostAgent",
    "HostContext",
    "HostLog",
    "HostResult",
    "HostTree",
    "HttpReporter",
    "InstallModuleError",
    "InstallRequirementsError",
    "JobFailure",
    "JobInstaller",
    "MetricScraper",
    "OutputLayout",
    "ProgressLine",
    "Reporter",
    "ScriptProcess",
    "SyncResult",
    "assign_objects",
    "build_environment",
    "called_process_error",
    "capacity_warnings",
    "count_machine_gpus",
    "decode_hyperparameters",
    "download_channel",
    "encode_hyperparameters",
    "entry_point_command",
    "entry_point_kind",
    "exit_failure_reason",
    "fetch_assignment",
    "input_data_config",
    "module_name",
    "pin_cpus",
    "read_failure_file",
    "resource_config",
    "sm_variables",
    "split_hyperparameters",
    "stderr_excerpt",
    "to_cmd_args",
    "to_env_vars",
    "training_env",
    "upload_archives",
    "upload_log",
]

_MODULE_OF = {
    "AgentApiError": "trainops.agent._client",
    "AgentClient": "trainops.agent._client",
    "Artifact": "trainops.agent._outputs",
    "DirectorySync": "trainops.agent._sync",
    "EntryPointKind": "trainops.agent._entry_point",
    "EventJournal": "trainops.agent._reporter",
    "HostAgent": "trainops.agent._agent",
    "HostContext": "trainops.agent._environment",
    "HostLog": "trainops.agent._hostlog",
    "HostResult": "trainops.agent._agent",
    "HostTree": "trainops.agent._tree",
    "HttpReporter": "trainops.agent._reporter",
    "InstallModuleError": "trainops.agent._installer",
    "InstallRequirementsError": "trainops.agent._installer",
    "JobFailure": "trainops.agent._installer",
    "JobInstaller": "trainops.agent._installer",
    "MetricScraper": "trainops.agent._metrics",
    "OutputLayout": "trainops.agent._outputs",
    "ProgressLine": "trainops.agent.channels",
    "Reporter": "trainops.agent._reporter",
    "SAGEMAKER_HYPERPARAMETERS": "trainops.agent._hyperparameters",
    "ScriptProcess": "trainops.agent._process",
    "SyncResult": "trainops.agent._sync",
    "assign_objects": "trainops.agent.channels",
    "build_environment": "trainops.agent._environment",
    "called_process_error": "trainops.agent._failure",
    "capacity_warnings": "trainops.agent._resources",
    "count_machine_gpus": "trainops.agent._environment",
    "decode_hyperparameters": "trainops.agent._hyperparameters",
    "download_channel": "trainops.agent.channels",
    "encode_hyperparameters": "trainops.agent._hyperparameters",
    "entry_point_command": "trainops.agent._entry_point",
    "entry_point_kind": "trainops.agent._entry_point",
    "exit_failure_reason": "trainops.agent._failure",
    "fetch_assignment": "trainops.agent._client",
    "input_data_config": "trainops.agent._tree",
    "module_name": "trainops.agent._entry_point",
    "pin_cpus": "trainops.agent._resources",
    "read_failure_file": "trainops.agent._failure",
    "resource_config": "trainops.agent._tree",
    "sm_variables": "trainops.agent._environment",
    "split_hyperparameters": "trainops.agent._hyperparameters",
    "stderr_excerpt": "trainops.agent._failure",
    "to_cmd_args": "trainops.agent._hyperparameters",
    "to_env_vars": "trainops.agent._hyperparameters",
    "training_env": "trainops.agent._environment",
    "upload_archives": "trainops.agent._outputs",
    "upload_log": "trainops.agent._outputs",
}

__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF)
