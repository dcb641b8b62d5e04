"""UpdateTrainingJob, and the profiler members CreateTrainingJob shares with it.

What a running job can take here: ``ProfilerRuleConfigurations`` (new profiler rules, evaluated
from the rules service's next tick; a rule the job has already cannot be changed, and profiler
rules need a job whose hosts started with the profiler). What it cannot: a new
``ProfilerConfig`` (the hosts' monitors run with the settings they started with; the job's own
settings again are accepted as no change), a warm pool (``ResourceConfig.KeepAlivePeriodInSeconds``
over 0: trainops keeps no instances after a job) and remote debugging
(``RemoteDebugConfig.EnableRemoteDebug``): each is a ``ValidationException`` saying so. A job that
has ended is refused as StopTrainingJob refuses it.

A SageMaker rule configuration names its rule in ``RuleParameters.rule_to_invoke`` (the SDK's
``ProfilerRule.sagemaker(rule_configs.X())`` sends that); the other parameters are the rule's
(strings, as the SDK sends them: those that read as JSON numbers, booleans or lists are
read so). ``RuleEvaluatorImage``, ``InstanceType``, ``VolumeSizeInGB``,
``LocalPath`` and ``S3OutputPath`` are the evaluator container's: trainops evaluates rules in the
control plane, so they are accepted and not used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from trainops._errors import JobNotFoundError, SpecError
from trainops.control import JobController, JobEndedError
from trainops.server.aws._errors import AwsError
from trainops.spec import rule_definition, rule_name
from trainops.store import JobRecord

__all__ = ["Updated", "profiler_sections", "rule_configs", "update_training_job"]

_NOT_FOUND = "Requested resource not found."
_RULE = "rule_to_invoke"


def _invalid(message: str) -> AwsError:
    return AwsError(400, "ValidationException", message)


def rule_configs(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``ProfilerRuleConfigurations`` as the spec's ``rules``."""
    rules = []
    for config in configs:
        params = dict(config.get("RuleParameters") or {})
        rule = params.pop(_RULE, None)
        if not rule:
            raise _invalid(
                f"ProfilerRuleConfigurations {config['RuleConfigurationName']!r}: RuleParameters "
                f"has no {_RULE}: name the built-in profiler rule (the SDK's "
                "ProfilerRule.sagemaker(rule_configs.X()) sets it)"
            )
        _check_profiler_rule(config["RuleConfigurationName"], rule)
        rules.append(
            {
                "name": config["RuleConfigurationName"],
                "rule": rule,
                "rule_parameters": {k: _parameter(v) for k, v in params.items()},
            }
        )
    return rules


def _check_profiler_rule(name: str, rule: str) -> None:
    """A built-in rule that is not a profiler rule has no place here (an unknown one is left to
    the spec's check, which lists the rules)."""
    try:
        kind = rule_definition(rule_name(rule)).kind
    except KeyError:
        return
    if kind != "profiler":
        raise _invalid(
            f"ProfilerRuleConfigurations {name!r}: {rule} is a {kind} rule, not a profiler rule "
            "(DebugRuleConfigurations are not supported through this API yet: give debugger "
            "rules in a trainops job spec)"
        )


def _parameter(text: str) -> Any:
    """A rule parameter as the rule takes it: SageMaker sends every one as a string
    (``"50"``, ``"true"``); one that reads as a JSON number, boolean or list is that."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # nested past the decoder's recursion: text too
        return text
    return value if isinstance(value, int | float | bool | list) else text


def profiler_config(config: dict[str, Any], job_name: str) -> dict[str, Any]:
    """``ProfilerConfig`` as the spec's ``profiler_config``. ``S3OutputPath`` is a base, as
    SageMaker (and the SDK's ``latest_job_profiler_artifacts_path``) read it: the job's data
    goes under ``<S3OutputPath>/<job>/profiler-output``, the spec's field names the prefix
    itself. ``ProfilingParameters`` (the framework profiler's settings in SageMaker's string
    encoding) are not read."""
    mapped: dict[str, Any] = {"disable_profiler": bool(config.get("DisableProfiler", False))}
    if config.get("S3OutputPath"):
        base = str(config["S3OutputPath"]).rstrip("/")
        mapped["s3_output_path"] = f"{base}/{job_name}/profiler-output"
    if "ProfilingIntervalInMilliseconds" in config:
        mapped["system_monitor_interval_millis"] = config["ProfilingIntervalInMilliseconds"]
    return mapped


def profiler_sections(body: dict[str, Any]) -> dict[str, Any]:
    """CreateTrainingJob's ``ProfilerConfig`` and ``ProfilerRuleConfigurations`` as spec
    fields (debugger rules are not mapped yet)."""
    sections: dict[str, Any] = {}
    if body.get("ProfilerConfig"):
        config = profiler_config(body["ProfilerConfig"], body["TrainingJobName"])
        sections["profiler_config"] = config
    if body.get("ProfilerRuleConfigurations"):
        sections["rules"] = rule_configs(body["ProfilerRuleConfigurations"])
    return sections


class Updated(Protocol):
    """The control plane whose jobs are updated, and each job's ARN (read per request)."""

    @property
    def controller(self) -> JobController: ...

    def arn(self, name: str) -> str: ...


def update_training_job(plane: Updated) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The UpdateTrainingJob handler over ``plane``'s jobs."""

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        controller = plane.controller
        name = body["TrainingJobName"]
        job = controller.store.get_job(name)
        if job is None:
            raise _invalid(_NOT_FOUND)
        _check_unchangeable(job, body)
        rules = rule_configs(body.get("ProfilerRuleConfigurations") or [])
        try:
            if rules:
                controller.add_rules(name, rules)
            elif job.status not in ("InProgress",):
                raise JobEndedError(job.status)
        except JobNotFoundError:
            raise _invalid(_NOT_FOUND) from None
        except JobEndedError:
            raise _ended(controller, name) from None
        except SpecError as exc:
            raise _invalid(_spec_line(exc)) from None
        return {"TrainingJobArn": plane.arn(name)}

    return handler


def _check_unchangeable(job: JobRecord, body: dict[str, Any]) -> None:
    keep_alive = (body.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds", 0)
    if keep_alive:
        raise _invalid(
            "ResourceConfig.KeepAlivePeriodInSeconds: trainops keeps no warm pools (its hosts "
            "are processes on this machine, started in well under a second); use 0 or leave "
            "ResourceConfig out"
        )
    if (body.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"):
        raise _invalid("RemoteDebugConfig.EnableRemoteDebug is not supported by trainops")
    config = body.get("ProfilerConfig")
    if config is not None and _changes_profiler(job, profiler_config(config, job.name)):
        raise _invalid(
            "ProfilerConfig cannot be changed while the job runs on trainops: its hosts' "
            "profilers run with the settings they started with; give ProfilerConfig at "
            "CreateTrainingJob (ProfilerRuleConfigurations can be added)"
        )


def _changes_profiler(job: JobRecord, wanted: dict[str, Any]) -> bool:
    current = job.spec.profiler_config
    if current is None:
        return not wanted["disable_profiler"]
    now = {
        "disable_profiler": current.disable_profiler,
        "s3_output_path": current.s3_output_path,
        "system_monitor_interval_millis": current.system_monitor_interval_millis,
    }
    return any(now.get(key) != value for key, value in wanted.items())


def _ended(controller: JobController, name: str) -> AwsError:
    job = controller.store.get_job(name)
    status = job.status if job is not None else "Deleted"
    return _invalid(f"The request was rejected because the training job is in status {status}.")


def _spec_line(exc: SpecError) -> str:
    return "; ".join(f"{field}: {reason}" for field, reason in exc.problems)[:2000]
