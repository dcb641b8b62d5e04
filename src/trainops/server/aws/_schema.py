"""The one declaration of where each job spec field lives in SageMaker's training API.

Each :class:`Member` names a spec field (a dotted path into ``JobSpec``), its member path in
CreateTrainingJob's request, its member path in DescribeTrainingJob's answer and its key path in
our REST describe. CreateTrainingJob's mapping is derived from it (:func:`declared_spec`: every
``derived`` member is read from the request at its path, converted, and put at its spec path);
the few members whose mapping reads more than their own member are mapped by hand in
``_create.py`` and say so (``by hand``). The describe views (``server/_views.describe``, then
``_sagemaker.api_description``) are checked against it by ``tests/server/aws/test_schema.py``: a
value sent at a member's request path must come back at its response path, and its REST key must
be there.

What is left out is left out by name: :data:`NOT_IN_API` (spec fields the API has no member
for), :data:`NOT_MAPPED_REQUEST` (CreateTrainingJob members accepted and not mapped) and
:data:`UNSUPPORTED_DESCRIBE` (DescribeTrainingJob members trainops does not produce). The
test fails when a spec field is in neither the members nor ``NOT_IN_API``, and when a member of
the botocore model's DescribeTrainingJob answer is neither produced nor in
``UNSUPPORTED_DESCRIBE``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MEMBERS",
    "NOT_IN_API",
    "NOT_MAPPED_REQUEST",
    "UNSUPPORTED_DESCRIBE",
    "Member",
    "at_path",
    "declared_spec",
]

#: How CreateTrainingJob's member becomes the spec field: ``derived`` (by :func:`declared_spec`),
#: ``by hand`` (in ``_create.py``: its mapping reads more than the member) or ``ignored`` (the
#: request's member is accepted and not mapped yet; the describe still shows the field).
Create = Literal["derived", "by hand", "ignored"]


def _same(value: Any) -> Any:
    return value


def _metric_definitions(value: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{"name": m["Name"], "regex": m["Regex"]} for m in value]


@dataclass(frozen=True, slots=True)
class Member:
    """One spec field's place in the API: ``request`` (CreateTrainingJob), ``response``
    (DescribeTrainingJob) and ``rest`` (our describe) are dotted member paths, ``None`` where
    that side has no such member."""

    spec: str
    request: str | None
    response: str | None
    rest: str | None
    create: Create = "derived"
    to_spec: Callable[[Any], Any] = _same


_AS_API = "="  # an override that is the member's ``api`` path


def _member(
    spec: str,
    api: str,
    create: Create = "derived",
    *,
    to_spec: Callable[[Any], Any] = _same,
    response: str | None = _AS_API,
    rest: str | None = _AS_API,
) -> Member:
    """A member at ``api`` in both the request and the answer (and at that key in the REST
    describe) unless ``response`` or ``rest`` say otherwise."""
    return Member(
        spec,
        api,
        api if response == _AS_API else response,
        api if rest == _AS_API else rest,
        create,
        to_spec,
    )


MEMBERS: tuple[Member, ...] = (
    # the service echoes sagemaker_program among the hyperparameters; trainops does not (yet)
    _member(
        "entry_point",
        "HyperParameters.sagemaker_program",
        "by hand",
        response=None,
        rest="AlgorithmSpecification.EntryPoint",
    ),
    _member("hyperparameters", "HyperParameters", "by hand"),
    _member("container_entrypoint", "AlgorithmSpecification.ContainerEntrypoint"),
    _member("container_args", "AlgorithmSpecification.ContainerArguments"),
    _member("instance_type", "ResourceConfig.InstanceType"),
    _member("instance_count", "ResourceConfig.InstanceCount"),
    _member("environment", "Environment"),
    _member("inputs", "InputDataConfig", "by hand"),
    _member("output_path", "OutputDataConfig.S3OutputPath"),
    _member("checkpoint.uri", "CheckpointConfig.S3Uri"),
    _member("checkpoint.local_path", "CheckpointConfig.LocalPath"),
    _member(
        "metric_definitions",
        "AlgorithmSpecification.MetricDefinitions",
        to_spec=_metric_definitions,
    ),
    _member("stopping_condition.max_runtime_in_seconds", "StoppingCondition.MaxRuntimeInSeconds"),
    _member(
        "stopping_condition.max_wait_time_in_seconds", "StoppingCondition.MaxWaitTimeInSeconds"
    ),
    _member("retry_strategy.maximum_retry_attempts", "RetryStrategy.MaximumRetryAttempts"),
    _member("use_spot_instances", "EnableManagedSpotTraining"),
    _member("profiler_config", "ProfilerConfig", "by hand"),
    _member("rules", "ProfilerRuleConfigurations", "by hand"),
    _member("debugger_hook_config", "DebugHookConfig", "ignored"),
    _member("tensorboard_output_config", "TensorBoardOutputConfig", "ignored"),
)

#: Spec fields (dotted paths; a section covers its fields) that the API has no member for.
NOT_IN_API: Mapping[str, str] = {
    "source_dir": "the code is the sagemaker_submit_directory tarball (the job's code URI)",
    "job_name": "the request's TrainingJobName names the job",
    "base_job_name": "the SDK makes the TrainingJobName from it before the request",
    "stopping_condition.grace_period_in_seconds": "trainops' own (SIGTERM to SIGKILL)",
    "chaos": "trainops' fault injection, for tests",
    "mount_opt_ml": "trainops' own (how the /opt/ml tree is made)",
    "distribution": "mapped by hand from the SDK's distribution hyperparameters "
    "(_create.distribution_of); the describe does not give them back yet",
    "python": "the Python the server's images setting maps AlgorithmSpecification.TrainingImage "
    "to (by hand in _create.py); the image itself is not kept yet",
}

#: CreateTrainingJob members (of the botocore model) that no member maps to a spec field.
NOT_MAPPED_REQUEST: Mapping[str, str] = {
    "TrainingJobName": "names the job (the store's key), not a spec field",
    "Tags": "kept in the tags table (ListTags), not in the spec",
    "RoleArn": "validated by the model, then not used: there is no IAM",
    "VpcConfig": "validated, then not used",
    "EnableNetworkIsolation": "validated, then not used",
    "EnableInterContainerTrafficEncryption": "validated, then not used",
    "DebugRuleConfigurations": "validated, then not used (debugger rules come in the spec)",
    "ExperimentConfig": "validated, then not used",
    "RemoteDebugConfig": "validated, then not used",
    "InfraCheckConfig": "validated, then not used",
    "SessionChainingConfig": "validated, then not used",
    "ServerlessJobConfig": "validated, then not used",
    "MlflowConfig": "validated, then not used",
    "ModelPackageConfig": "validated, then not used",
}

#: DescribeTrainingJob members (of the botocore model) that trainops does not produce.
UNSUPPORTED_DESCRIBE: Mapping[str, str] = {
    "LabelingJobArn": "no Ground Truth labeling jobs",
    "AutoMLJobArn": "no AutoML jobs",
    "RoleArn": "accepted by CreateTrainingJob and not kept: there is no IAM",
    "WarmPoolStatus": "no warm pools",
    "VpcConfig": "accepted and not kept: no VPCs",
    "EnableNetworkIsolation": "accepted and not kept",
    "EnableInterContainerTrafficEncryption": "accepted and not kept",
    "BillableTokenCount": "no token-billed jobs",
    "ExperimentConfig": "no SageMaker Experiments",
    "RemoteDebugConfig": "remote debugging is refused (UpdateTrainingJob says so)",
    "InfraCheckConfig": "no infrastructure checks",
    "ServerlessJobConfig": "no serverless jobs",
    "MlflowConfig": "no MLflow integration",
    "MlflowDetails": "no MLflow integration",
    "ModelPackageConfig": "no model registry",
    "OutputModelPackageArn": "no model registry",
    "ProgressInfo": "not reported",
}


def at_path(data: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted member path of ``data``; ``None`` where a part is missing."""
    found: Any = data
    for part in path.split("."):
        if not isinstance(found, Mapping):
            return None
        found = found.get(part)
    return found


def _absent(value: Any) -> bool:
    """A member that leaves the spec's default: missing, null, empty or ``False``."""
    return value is None or value is False or (isinstance(value, str | list | dict) and not value)


def declared_spec(body: Mapping[str, Any]) -> dict[str, Any]:
    """The spec fields of a CreateTrainingJob request that :data:`MEMBERS` derive."""
    spec: dict[str, Any] = {}
    for member in MEMBERS:
        if member.create != "derived" or member.request is None:
            continue
        value = at_path(body, member.request)
        if _absent(value):
            continue
        *sections, field = member.spec.split(".")
        into = spec
        for section in sections:
            into = into.setdefault(section, {})
        into[field] = member.to_spec(value)
    return spec
