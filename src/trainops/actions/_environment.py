"""The environment a rule's command action runs with: the job's, never the server's.

A command action is code the job's submitter chose, run because of the job: it gets what the
job's own script is given (the spec's ``environment`` and the job's ``SM_*`` variables, as
its first host ``algo-1`` sees them, without the paths of a host's tree) and nothing of the
control plane's environment: no API token (``TRAINOPS_TOKEN``), no ``TRAINOPS_HOME``, no cloud
credentials (``AWS_*``), no proxy or library settings of the server. Only a fixed ``PATH``,
``LANG``, and ``HOME``/``TMPDIR`` (the command's own scratch folder) are added, then
``TRAINOPS_JOB``, ``TRAINOPS_RULE`` and ``TRAINOPS_RULE_STATUS``.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainops.protocol import SubmittedJob

__all__ = ["BASE_PATH", "base_variables", "job_environment"]

#: The ``PATH`` a command action gets (the server's own is not passed on).
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def job_environment(job_name: str, spec: SubmittedJob, hosts: Sequence[str]) -> dict[str, str]:
    """The job's recorded environment: ``SM_*`` of its first host, then its spec's own."""
    from trainops.agent import split_hyperparameters, to_env_vars

    hosts = list(hosts) or [f"algo-{i}" for i in range(1, spec.instance_count + 1)]
    user, framework, _sagemaker = split_hyperparameters(spec.hyperparameters)
    program = spec.entry_point
    variables = to_env_vars(
        {
            "current_host": hosts[0],
            "hosts": hosts,
            "hps": user,
            "framework_params": framework,
            "user_entry_point": program,
            "module_name": program[:-3] if program.endswith(".py") else program,
            "current_instance_type": spec.instance_type,
            "user_args": _user_args(user),
            **{f"hp_{key}": value for key, value in user.items()},
        }
    )
    variables["TRAINING_JOB_NAME"] = job_name
    variables.update(spec.environment)
    return variables


def _user_args(user: dict[str, object]) -> list[str]:
    from trainops.agent import to_cmd_args

    args: list[str] = to_cmd_args(user)
    return args


def base_variables(scratch: str) -> dict[str, str]:
    """What every command gets besides the job's variables."""
    return {"PATH": BASE_PATH, "LANG": "C.UTF-8", "HOME": scratch, "TMPDIR": scratch}
