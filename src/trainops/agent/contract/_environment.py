"""The script's environment: every ``SM_*`` variable the training toolkit sets, and a few more.

The toolkit's ``Environment`` is built once here as a plain dict (:func:`training_env`, which is
also ``SM_TRAINING_ENV``), and the ``SM_*`` variables are derived from it with the toolkit's
``to_env_vars`` rules. trainops adds ``TRAINING_JOB_NAME``/``ARN`` (set by the platform on
SageMaker), ``AWS_REGION`` (the toolkit sets it from ``sagemaker_region``),
``SAGEMAKER_BASE_DIR``, ``SM_CHECKPOINT_DIR`` (SageMaker has no such variable, so portable
scripts default to ``/opt/ml/checkpoints``), thread limits and ``CUDA_VISIBLE_DEVICES`` from the
host's reservation, and finally the spec's ``environment`` on top.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.agent.contract._hyperparameters import split_hyperparameters, to_cmd_args, to_env_vars
from trainops.agent.contract._tree import HostTree
from trainops.protocol import HostResources, training_job_arn

__all__ = [
    "HostContext",
    "build_environment",
    "count_machine_gpus",
    "sm_variables",
    "training_env",
]

AGENT_PREFIX = "TRAINOPS_AGENT_"
# The control plane's own settings: they name the home, the server or its credentials, and a
# job's script is not to know them (docs/isolation.md). In-job settings (TRAINOPS_PROFILER_*,
# TRAINOPS_DATA_*, TRAINOPS_TRANSFER_* …) stay.
SERVER_VARIABLES = frozenset(
    {
        "TRAINOPS_HOME",
        "TRAINOPS_TOKEN",
        "TRAINOPS_SERVER",
        "TRAINOPS_ALLOWED_HOSTS",
        "TRAINOPS_BACKEND",
        "TRAINOPS_KEEP_JOB_TREES",
        "TRAINOPS_HEARTBEAT_TIMEOUT",
        "TRAINOPS_SHARED_PATHS",
        "TRAINOPS_NO_BROWSER",
    }
)
SERVER_PREFIXES = (AGENT_PREFIX, "TRAINOPS_LOCAL_", "TRAINOPS_RAY_")
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled",
    "sagemaker_parameter_server_enabled",
    "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_multi_worker_mirrored_strategy_enabled",
)


@dataclass(frozen=True, slots=True)
class HostContext:
    """Who this host is within its job."""

    job_name: str
    current_host: str
    hosts: list[str]
    resources: HostResources
    entry_point: str
    # The declared instance type's vCPUs: what SM_NUM_CPUS says, so that a script sizing its
    # world by it forms the world it would form in the cloud, even on a smaller machine.
    instance_vcpus: int | None = None
    # The server's region: the job's ARN names it, as the API's answers name it.
    region: str = "us-east-1"

    @property
    def num_cpus(self) -> int:
        return self.instance_vcpus or self.reserved_cpus

    @property
    def reserved_cpus(self) -> int:
        """The CPUs this host may actually run on (thread limits follow these)."""
        return self.resources.num_cpus or os.cpu_count() or 1

    @property
    def num_gpus(self) -> int:
        return self.resources.num_gpus


def training_env(
    tree: HostTree,
    host: HostContext,
    hyperparameters: Mapping[str, Any],
    seen: HostTree | None = None,
) -> dict[str, Any]:
    """The toolkit's ``Environment`` as a dict, read from the tree's config files; its paths
    are those of ``seen``, the tree as the script sees it (``/opt/ml`` with ``mount_opt_ml``),
    by default ``tree`` itself."""
    paths = seen or tree
    resources = tree.read_config("resourceconfig.json")
    data_config = tree.read_config("inputdataconfig.json")
    user, framework, sagemaker = split_hyperparameters(hyperparameters)
    groups = resources.get("instance_groups", [])
    group = resources.get("current_group_name", "homogeneousCluster")
    dist_groups = framework.get(
        "sagemaker_distribution_instance_groups", _dist_groups(framework, group)
    )
    dist_hosts = [h for g in groups if g["instance_group_name"] in dist_groups for h in g["hosts"]]
    master = dist_hosts[0] if dist_hosts else resources["hosts"][0]
    program = str(sagemaker.get("sagemaker_program", host.entry_point))
    return {
        "additional_framework_parameters": framework,
        "channel_input_dirs": {name: str(paths.channel_dir(name)) for name in data_config},
        "current_host": resources["current_host"],
        "current_instance_group": group,
        "current_instance_group_hosts": next(
            (g["hosts"] for g in groups if g["instance_group_name"] == group), []
        ),
        "current_instance_type": resources.get("current_instance_type", "local"),
        "distribution_hosts": dist_hosts,
        "distribution_instance_groups": dist_groups,
        "framework_module": None,
        "hosts": resources["hosts"],
        "hyperparameters": user,
        "input_config_dir": str(paths.config_dir),
        "input_data_config": data_config,
        "input_dir": str(paths.input_dir),
        "instance_groups": [g["instance_group_name"] for g in groups],
        "instance_groups_dict": {g["instance_group_name"]: g for g in groups},
        "is_hetero": len(groups) > 1,
        "is_master": resources["current_host"] == master,
        "is_modelparallel_enabled": bool(user.get("mp_parameters")),
        "is_smddpmprun_installed": False,
        "is_smddprun_installed": False,
        "job_name": host.job_name,
        "log_level": sagemaker.get("sagemaker_container_log_level", 20),
        "master_hostname": master,
        "model_dir": str(paths.model_dir),
        "module_dir": str(sagemaker.get("sagemaker_submit_directory", paths.code_dir)),
        "module_name": program[:-3] if program.endswith(".py") else program,
        "network_interface_name": resources.get("network_interface_name", "eth0"),
        "num_cpus": host.num_cpus,
        "num_gpus": host.num_gpus,
        "num_neurons": 0,
        "output_data_dir": str(paths.output_data_dir),
        "output_dir": str(paths.output_dir),
        "output_intermediate_dir": str(paths.intermediate_dir),
        "resource_config": resources,
        "topology": resources.get("topology"),
        "user_entry_point": program,
    }


def build_environment(
    tree: HostTree,
    host: HostContext,
    hyperparameters: Mapping[str, Any],
    *,
    spec_environment: Mapping[str, str],
    base_env: Mapping[str, str],
    machine_gpus: int,
    seen: HostTree | None = None,
) -> dict[str, str]:
    """The complete environment of the script's process (paths as ``seen`` by it)."""
    paths = seen or tree
    env = {k: v for k, v in base_env.items() if not _server_variable(k)}
    env.update(sm_variables(training_env(tree, host, hyperparameters, seen)))
    env.update(_platform_variables(paths, host))
    env.update(_resource_variables(host, machine_gpus))
    region = hyperparameters.get("sagemaker_region")
    if region:  # as the toolkit does (os.environ[REGION_NAME_ENV] = sagemaker_region)
        env["AWS_REGION"] = str(region)
    env["PYTHONPATH"] = _prepend_path(str(paths.code_dir), env.get("PYTHONPATH"))
    env.update(spec_environment)
    return env


def _server_variable(name: str) -> bool:
    return name in SERVER_VARIABLES or name.startswith(SERVER_PREFIXES)


def sm_variables(environment: Mapping[str, Any]) -> dict[str, str]:
    """``Environment.to_env_vars()``: the ``SM_*`` variables derived from :func:`training_env`."""
    hps = environment["hyperparameters"]
    source: dict[str, Any] = {
        "hosts": environment["hosts"],
        "network_interface_name": environment["network_interface_name"],
        "hps": hps,
        "user_entry_point": environment["user_entry_point"],
        "framework_params": environment["additional_framework_parameters"],
        "resource_config": environment["resource_config"],
        "input_data_config": environment["input_data_config"],
        "output_data_dir": environment["output_data_dir"],
        "channels": sorted(environment["channel_input_dirs"]),
        "training_env": environment,
        "user_args": to_cmd_args(hps),
    }
    for key in _COPIED_KEYS:
        source[key] = environment[key]
    source.update({f"channel_{n}": p for n, p in environment["channel_input_dirs"].items()})
    source.update({f"hp_{k}": v for k, v in hps.items()})
    return to_env_vars(source)


_COPIED_KEYS = (
    "current_host",
    "current_instance_type",
    "current_instance_group",
    "current_instance_group_hosts",
    "instance_groups",
    "instance_groups_dict",
    "distribution_instance_groups",
    "is_hetero",
    "module_name",
    "log_level",
    "framework_module",
    "input_dir",
    "input_config_dir",
    "output_dir",
    "num_cpus",
    "num_gpus",
    "num_neurons",
    "model_dir",
    "module_dir",
    "output_intermediate_dir",
)


def _dist_groups(framework: Mapping[str, Any], group: str) -> list[str]:
    return [group] if any(framework.get(flag) for flag in DISTRIBUTION_FLAGS) else []


def _platform_variables(tree: HostTree, host: HostContext) -> dict[str, str]:
    return {
        "TRAINING_JOB_NAME": host.job_name,
        "TRAINING_JOB_ARN": training_job_arn(host.region, host.job_name),
        "SAGEMAKER_BASE_DIR": str(tree.root),
        "SM_CHECKPOINT_DIR": str(tree.checkpoint_dir),
        "PYTHONUNBUFFERED": "1",
    }


def _resource_variables(host: HostContext, machine_gpus: int) -> dict[str, str]:
    env: dict[str, str] = {}
    if host.resources.num_cpus:
        env.update(dict.fromkeys(THREAD_VARIABLES, str(host.reserved_cpus)))
    if host.resources.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in host.resources.gpus)
    # With a gpu_count and no ids, the backend's engine gave the agent its GPUs: the
    # CUDA_VISIBLE_DEVICES it inherited stands. With neither, the script sees no GPU.
    elif not host.resources.gpu_count and machine_gpus > 0:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _prepend_path(entry: str, current: str | None) -> str:
    return entry if not current else f"{entry}{os.pathsep}{current}"


def count_machine_gpus(dev: Path = Path("/dev")) -> int:
    """NVIDIA GPUs on this machine (``/dev/nvidia<N>`` devices), without running nvidia-smi."""
    try:
        names = [p.name for p in dev.iterdir() if p.name.startswith("nvidia")]
        return sum(1 for name in names if name.removeprefix("nvidia").isdigit())
    except OSError:
        return 0
