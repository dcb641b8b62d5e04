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
    from trainops.agent.channels import ProgressLine, assign_objects, download_channel
    from trainops.agent.contract._entry_point import (
        EntryPointKind,
        entry_point_command,
        entry_point_kind,
        module_name,
    )
    from trainops.agent.contract._environment import (
        HostContext,
        build_environment,
        count_machine_gpus,
        sm_variables,
        training_env,
    )
    from trainops.agent.contract._failure import (
        called_process_error,
        exit_failure_reason,
        read_failure_file,
        stderr_excerpt,
    )
    from trainops.agent.contract._hyperparameters import (
        SAGEMAKER_HYPERPARAMETERS,
        decode_hyperparameters,
        encode_hyperparameters,
        split_hyperparameters,
        to_cmd_args,
        to_env_vars,
    )
    from trainops.agent.contract._installer import (
        InstallModuleError,
        InstallRequirementsError,
        JobFailure,
        JobInstaller,
    )
    from trainops.agent.contract._outputs import Artifact, OutputLayout, upload_archives, upload_log
    from trainops.agent.contract._resources import capacity_warnings, pin_cpus
    from trainops.agent.contract._tree import HostTree, input_data_config, resource_config
    from trainops.agent.reporting._client import AgentApiError, AgentClient, fetch_assignment
    from trainops.agent.reporting._hostlog import HostLog
    from trainops.agent.reporting._metrics import MetricScraper
    from trainops.agent.reporting._reporter import EventJournal, HttpReporter, Reporter
    from trainops.agent.reporting._sync import DirectorySync, SyncResult
    from trainops.agent.supervision._process import ScriptProcess

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
    "AgentApiError": "trainops.agent.reporting._client",
    "AgentClient": "trainops.agent.reporting._client",
    "Artifact": "trainops.agent.contract._outputs",
    "DirectorySync": "trainops.agent.reporting._sync",
    "EntryPointKind": "trainops.agent.contract._entry_point",
    "EventJournal": "trainops.agent.reporting._reporter",
    "HostAgent": "trainops.agent._agent",
    "HostContext": "trainops.agent.contract._environment",
    "HostLog": "trainops.agent.reporting._hostlog",
    "HostResult": "trainops.agent._agent",
    "HostTree": "trainops.agent.contract._tree",
    "HttpReporter": "trainops.agent.reporting._reporter",
    "InstallModuleError": "trainops.agent.contract._installer",
    "InstallRequirementsError": "trainops.agent.contract._installer",
    "JobFailure": "trainops.agent.contract._installer",
    "JobInstaller": "trainops.agent.contract._installer",
    "MetricScraper": "trainops.agent.reporting._metrics",
    "OutputLayout": "trainops.agent.contract._outputs",
    "ProgressLine": "trainops.agent.channels",
    "Reporter": "trainops.agent.reporting._reporter",
    "SAGEMAKER_HYPERPARAMETERS": "trainops.agent.contract._hyperparameters",
    "ScriptProcess": "trainops.agent.supervision._process",
    "SyncResult": "trainops.agent.reporting._sync",
    "assign_objects": "trainops.agent.channels",
    "build_environment": "trainops.agent.contract._environment",
    "called_process_error": "trainops.agent.contract._failure",
    "capacity_warnings": "trainops.agent.contract._resources",
    "count_machine_gpus": "trainops.agent.contract._environment",
    "decode_hyperparameters": "trainops.agent.contract._hyperparameters",
    "download_channel": "trainops.agent.channels",
    "encode_hyperparameters": "trainops.agent.contract._hyperparameters",
    "entry_point_command": "trainops.agent.contract._entry_point",
    "entry_point_kind": "trainops.agent.contract._entry_point",
    "exit_failure_reason": "trainops.agent.contract._failure",
    "fetch_assignment": "trainops.agent.reporting._client",
    "input_data_config": "trainops.agent.contract._tree",
    "module_name": "trainops.agent.contract._entry_point",
    "pin_cpus": "trainops.agent.contract._resources",
    "read_failure_file": "trainops.agent.contract._failure",
    "resource_config": "trainops.agent.contract._tree",
    "sm_variables": "trainops.agent.contract._environment",
    "split_hyperparameters": "trainops.agent.contract._hyperparameters",
    "stderr_excerpt": "trainops.agent.contract._failure",
    "to_cmd_args": "trainops.agent.contract._hyperparameters",
    "to_env_vars": "trainops.agent.contract._hyperparameters",
    "training_env": "trainops.agent.contract._environment",
    "upload_archives": "trainops.agent.contract._outputs",
    "upload_log": "trainops.agent.contract._outputs",
}

__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF)
