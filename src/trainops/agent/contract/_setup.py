"""Getting a host ready for its script: the config files, the environment and the command.

The hyperparameters are written as the SDK sends them and read back as the toolkit reads them,
so the script's arguments and ``SM_*`` variables come from the same file it can read itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainops.agent.contract._entry_point import entry_point_command, entry_point_kind
from trainops.agent.contract._environment import HostContext, build_environment, count_machine_gpus
from trainops.agent.contract._hyperparameters import (
    decode_hyperparameters,
    encode_hyperparameters,
    split_hyperparameters,
    to_cmd_args,
)
from trainops.agent.contract._installer import JobInstaller
from trainops.agent.contract._tree import OPT_ML, HostTree, input_data_config, resource_config
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.catalog import get_instance_type
from trainops.protocol import Assignment, SubmittedJob

__all__ = ["ScriptCommand", "script_command", "script_environment", "write_configs"]

HYPERPARAMETERS = "hyperparameters.json"


def write_configs(tree: HostTree, assignment: Assignment, job: SubmittedJob) -> None:
    """``hyperparameters.json``, ``resourceconfig.json`` and ``inputdataconfig.json``."""
    hps = encode_hyperparameters(
        # The distribution's flags reach the script as the SDK sends them (SM_FRAMEWORK_PARAMS).
        {**job.hyperparameters, **job.distribution.framework_hyperparameters()},
        program=job.entry_point,
        submit_directory=assignment.code_uri,
        job_name=assignment.job_name,
        region=assignment.region,
    )
    if job.container_entrypoint is not None:
        # A container command is not the training toolkit: it is given the request's
        # hyperparameters only, text as sent, as the service gives a container (no
        # sagemaker_* entries, no JSON encoding added).
        hps = {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in job.hyperparameters.items()
        }
    tree.write_config(HYPERPARAMETERS, hps)
    resources = resource_config(assignment.current_host, assignment.hosts, job.instance_type)
    tree.write_config("resourceconfig.json", resources)
    tree.write_config("inputdataconfig.json", input_data_config(job.inputs))


def script_environment(
    tree: HostTree, assignment: Assignment, job: SubmittedJob, environ: Mapping[str, str]
) -> dict[str, str]:
    """The script's environment, built from the config files :func:`write_configs` wrote."""
    host = HostContext(
        assignment.job_name,
        assignment.current_host,
        assignment.hosts,
        assignment.resources,
        job.entry_point,
        instance_vcpus=get_instance_type(job.instance_type).vcpus,
        region=assignment.region,
    )
    return build_environment(
        tree,
        host,
        decode_hyperparameters(tree.read_config(HYPERPARAMETERS)),
        spec_environment=job.environment,
        base_env=environ,
        machine_gpus=count_machine_gpus(),
        # Where /opt/ml is shown the script sees its tree there, and every SM_* path says so.
        seen=HostTree(Path(OPT_ML), tree.checkpoint_path)
        if opt_ml_shown(job.mount_opt_ml)
        else None,
    )


@dataclass(frozen=True, slots=True)
class ScriptCommand:
    """The script's argv, and its parts a launcher may rearrange (torchrun, mpirun)."""

    argv: list[str]
    python: str
    args: list[str]


def script_command(
    tree: HostTree, job: SubmittedJob, env: dict[str, str], installer: JobInstaller
) -> ScriptCommand:
    """Install what the source directory needs and return the script's argv.

    The job's interpreter directory goes first on ``PATH`` so that ``python`` in a shell entry
    point is the same interpreter a ``.py`` entry point runs with; a container's command gets
    the job's own environment there (what it installs stays the job's).
    """
    kind = entry_point_kind(tree.code_dir, job.entry_point)
    container = job.container_entrypoint is not None
    python = installer.layer() if container else installer.prepare(kind)
    # The interpreter's own directory follows its layer's: its programs (torchrun, mpirun's
    # helpers) stay found.
    bins = dict.fromkeys([str(Path(python).parent), str(Path(installer.python).parent)])
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    user, _framework, _sagemaker = split_hyperparameters(
        decode_hyperparameters(tree.read_config(HYPERPARAMETERS))
    )
    args = to_cmd_args(user)
    if job.container_entrypoint is not None:  # an argv list the request named: no shell built
        return ScriptCommand([*job.container_entrypoint, *job.container_args], python, [])
    argv = entry_point_command(kind, tree.code_dir, job.entry_point, python, args)
    return ScriptCommand(argv, python, args)
