"""The one declaration of where each job spec field lives in SageMaker's training API.

Each :class:`Member` names a spec field (a dotted path into ``JobSpec``), its member path in
CreateTrainingJob's request, its member path in DescribeTrainingJob's answer and its key path in
our REST describe. CreateTrainingJob's mapping is derived from it (:func:`declared_spec`: every
``derived`` member is read from the request at its path, converted, and put at its spec path);
the few members whose mapping reads more than their own member are mapped by hand in
``_create.py`` and say so (``by hand``). So is the REST describe's part that the spec gives
(:func:`rest_sections`: every member's value at its ``rest`` path, made by its ``to_rest``, one of
``_rest_fields``), but for the members whose showing reads the store or the job's record and
names the view that shows them (``rest_by``); its other keys are the views' own, each named in
:data:`VIEW_KEYS`. The API's describe is made from the REST one (``aws/_sagemaker``).
``tests/server/aws/test_schema.py`` checks it all: a value sent at a member's request path must
come back at its response path, its REST key must be there, and the REST describe may have no
key that is neither a member's nor in ``VIEW_KEYS``.

Some members are given back as the request sent them and have no spec field: :data:`KEPT` (kept
with the job, in the store's ``api_requests``, and laid over DescribeTrainingJob's answer at the
same path) and :data:`KEPT_TUNING` (the same for CreateHyperParameterTuningJob's request and its
describe). The SDK's ``attach`` reads them back (``RoleArn``, ``TrainingImage``, the
hyperparameters JSON-encoded with their ``sagemaker_*`` entries).

What is left out is left out by name: :data:`NOT_IN_API` (spec fields the API has no member
for), :data:`NOT_MAPPED_REQUEST` (CreateTrainingJob members accepted and not mapped) and
:data:`UNSUPPORTED_DESCRIBE` (DescribeTrainingJob members trainops does not produce). The
test fails when a spec field is in neither the members nor ``NOT_IN_API``, and when a member of
the botocore model's DescribeTrainingJob answer is neither produced nor in
``UNSUPPORTED_DESCRIBE``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from trainops.server import _rest_fields as rest_fields
from trainops.server._rest_fields import OMIT, Shown

__all__ = [
    "KEPT",
    "KEPT_TUNING",
    "MEMBERS",
    "NOT_IN_API",
    "NOT_MAPPED_REQUEST",
    "TRAINOPS_ONLY",
    "UNSUPPORTED_DESCRIBE",
    "VIEW_KEYS",
    "Member",
    "Shown",
    "at_path",
    "declared_spec",
    "kept_of",
    "rest_sections",
    "split_trainops",
    "with_kept",
]

#: How CreateTrainingJob's member becomes the spec field: ``derived`` (by :func:`declared_spec`),
#: ``by hand`` (in ``_create.py``: its mapping reads more than the member) or ``ignored`` (the
#: request's member is accepted and not mapped yet; the describe still shows the field).
Create = Literal["derived", "by hand", "ignored"]


def _same(value: Any) -> Any:
    return value


def _metric_definitions(value: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{"name": m["Name"], "regex": m["Regex"]} for m in value]


#: How the REST describe shows a spec field's value (``_rest_fields``; ``OMIT``: left out).
ToRest = Callable[[Any, Shown], Any]


@dataclass(frozen=True, slots=True)
class Member:
    """One spec field's place in the API: ``request`` (CreateTrainingJob), ``response``
    (DescribeTrainingJob) and ``rest`` (our describe) are dotted member paths, ``None`` where
    that side has no such member. The REST describe shows the field at ``rest`` as ``to_rest``
    makes it (:func:`rest_sections`), or, where showing it reads more than the field (the
    store's rule statuses, the job's output prefix), as the view named by ``rest_by`` does."""

    spec: str
    request: str | None
    response: str | None
    rest: str | None
    create: Create = "derived"
    to_spec: Callable[[Any], Any] = _same
    to_rest: ToRest = rest_fields.as_is
    rest_by: str | None = None


_AS_API = "="  # an override that is the member's ``api`` path


def _member(
    spec: str,
    api: str,
    create: Create = "derived",
    *,
    to_spec: Callable[[Any], Any] = _same,
    response: str | None = _AS_API,
    rest: str | None = _AS_API,
    to_rest: ToRest = rest_fields.as_is,
    rest_by: str | None = None,
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
        to_rest,
        rest_by,
    )


MEMBERS: tuple[Member, ...] = (
    # In the REST describe's order. The API's describe gives sagemaker_program back among the
    # hyperparameters (KEPT).
    _member("hyperparameters", "HyperParameters", "by hand", to_rest=rest_fields.hyperparameters),
    _member(
        "entry_point",
        "HyperParameters.sagemaker_program",
        "by hand",
        response=None,
        rest="AlgorithmSpecification.EntryPoint",
    ),
    _member(
        "metric_definitions",
        "AlgorithmSpecification.MetricDefinitions",
        to_spec=_metric_definitions,
        to_rest=rest_fields.metric_definitions,
    ),
    _member(
        "container_entrypoint",
        "AlgorithmSpecification.ContainerEntrypoint",
        to_rest=rest_fields.omitted_if_none,
    ),
    _member(
        "container_args",
        "AlgorithmSpecification.ContainerArguments",
        to_rest=rest_fields.omitted_if_empty,
    ),
    _member("instance_type", "ResourceConfig.InstanceType"),
    _member("instance_count", "ResourceConfig.InstanceCount"),
    _member("inputs", "InputDataConfig", "by hand", to_rest=rest_fields.channels),
    _member("output_path", "OutputDataConfig.S3OutputPath", to_rest=rest_fields.output_path),
    _member(
        "disable_output_compression",
        "OutputDataConfig.CompressionType",
        to_spec=rest_fields.uncompressed,
        to_rest=rest_fields.compression_type,
    ),
    _member("checkpoint.uri", "CheckpointConfig.S3Uri", to_rest=rest_fields.masked_uri),
    _member("checkpoint.local_path", "CheckpointConfig.LocalPath"),
    _member("stopping_condition.max_runtime_in_seconds", "StoppingCondition.MaxRuntimeInSeconds"),
    Member(  # trainops' own (SIGTERM to SIGKILL): the API has no member for it
        "stopping_condition.grace_period_in_seconds",
        None,
        None,
        "StoppingCondition.GracePeriodInSeconds",
    ),
    _member(
        "stopping_condition.max_wait_time_in_seconds",
        "StoppingCondition.MaxWaitTimeInSeconds",
        to_rest=rest_fields.omitted_if_none,
    ),
    _member("retry_strategy.maximum_retry_attempts", "RetryStrategy.MaximumRetryAttempts"),
    _member("environment", "Environment", to_rest=rest_fields.masked_mapping),
    _member("use_spot_instances", "EnableManagedSpotTraining"),
    _member("profiler_config", "ProfilerConfig", "by hand", rest_by="profiler_sections"),
    _member("rules", "ProfilerRuleConfigurations", "by hand", rest_by="profiler_sections"),
    _member("debugger_hook_config", "DebugHookConfig", "ignored", rest_by="debug_sections"),
    _member(
        "tensorboard_output_config",
        "TensorBoardOutputConfig",
        "ignored",
        rest_by="debug_sections",
    ),
)

#: Spec fields (dotted paths; a section covers its fields) that the API has no member for.
NOT_IN_API: Mapping[str, str] = {
    "source_dir": "the code is the sagemaker_submit_directory tarball (the job's code URI)",
    "job_name": "the request's TrainingJobName names the job",
    "base_job_name": "the SDK makes the TrainingJobName from it before the request",
    "chaos": "trainops' fault injection, for tests",
    "mount_opt_ml": "trainops' own (how the /opt/ml tree is made)",
    "distribution": "mapped by hand from the SDK's distribution hyperparameters "
    "(_create.distribution_of); the describe does not give them back yet",
    "python": "the Python the server's images setting maps AlgorithmSpecification.TrainingImage "
    "to (by hand in _create.py); the image itself is KEPT as sent",
}

#: CreateTrainingJob members given back by DescribeTrainingJob as the request sent them (kept
#: with the job; a job made otherwise than by the API has none of them but ``HyperParameters``,
#: its spec's, and ``VolumeSizeInGB``/``KmsKeyId``, the service's defaults).
KEPT: Mapping[str, str] = {
    "RoleArn": "not used (there is no IAM); the SDK's attach needs it",
    "AlgorithmSpecification.TrainingImage": "mapped to a Python (images setting); the SDK's "
    "attach reads the framework and its version from it",
    "HyperParameters": "as sent: the SDK's JSON-encoded values and its sagemaker_* entries "
    "(the spec keeps them unwrapped, without those), masked as the describe masks them",
    "ResourceConfig.VolumeSizeInGB": "not used (no volumes); the service gives it back",
    "OutputDataConfig.KmsKeyId": "not used (no KMS); the service gives it back",
}

#: CreateHyperParameterTuningJob members given back by DescribeHyperParameterTuningJob as the
#: request sent them (the SDK's HyperparameterTuner.attach builds its estimator from them).
KEPT_TUNING: Mapping[str, str] = {
    "TrainingJobDefinition.RoleArn": "not used (there is no IAM)",
    "TrainingJobDefinition.AlgorithmSpecification.TrainingImage": "mapped to a Python",
    "TrainingJobDefinition.StaticHyperParameters": "as sent (with _tuning_objective_metric and "
    "the SDK's sagemaker_* entries), masked",
    "TrainingJobDefinition.ResourceConfig.VolumeSizeInGB": "not used (no volumes)",
    "TrainingJobDefinition.HyperParameterTuningResourceConfig": "as sent (the SDK sends a "
    "tuner's instances there); the trials run on its first instance config, given as "
    "ResourceConfig too",
    "TrainingJobDefinition.OutputDataConfig.KmsKeyId": "not used (no KMS)",
}

#: CreateTrainingJob members (of the botocore model) that no member maps to a spec field.
NOT_MAPPED_REQUEST: Mapping[str, str] = {
    "TrainingJobName": "names the job (the store's key), not a spec field",
    "Tags": "kept in the tags table (ListTags), not in the spec",
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


#: What our REST describe shows that DescribeTrainingJob has no member for (``[]``: each item of
#: a list): ``trainops describe`` prints these under :data:`TRAINOPS_KEY`, at the same path, and
#: the rest in the API's shape, so it diffs against SageMaker's answer. A test checks the rest
#: against the botocore model's output shape: a new REST key is declared here or fails it.
TRAINOPS_ONLY: Mapping[str, str] = {
    "Hosts": "each host's status, exit code, node and ranks",
    "Attempt": "the job's attempt (retries and spot interruptions)",
    "Interruptions": "spot interruptions so far",
    "ManagedSpotTrainingSavings": "the SDK prints it; the API has no member",
    "Cost": "the estimated cost (on-demand and spot)",
    "Artifacts": "every artifact the job wrote, per host",
    "AlgorithmSpecification.EntryPoint": "the script (the API has it as sagemaker_program)",
    "StoppingCondition.GracePeriodInSeconds": "SIGTERM to SIGKILL",
    "InputDataConfig[].Uri": "our spelling of DataSource.S3DataSource.S3Uri",
    "InputDataConfig[].Distribution": "our spelling of S3DataDistributionType",
    "InputDataConfig[].S3DataType": "our spelling of DataSource.S3DataSource.S3DataType",
    "InputDataConfig[].FileSystem": "a file system channel, as the spec names it",
    "DebugOutputPath": "where the debugger hook's tensors are written",
    "ProfilerRuleEvaluationStatuses[].Evaluation": "a rule's verdict, evidence and actions",
    "DebugRuleEvaluationStatuses[].Evaluation": "a rule's verdict, evidence and actions",
}

#: The key ``trainops describe`` prints :data:`TRAINOPS_ONLY` under.
TRAINOPS_KEY = "Trainops"

#: The REST describe's keys that its own views compute from the job's record and the store
#: (status, times, hosts, artifacts, metrics, rule statuses) rather than from one spec field.
#: With the members' ``rest`` paths they are every key it has: a test fails on any other.
VIEW_KEYS: Mapping[str, str] = {
    "TrainingJobName": "the job's name",
    "TrainingJobStatus": "the job's status",
    "SecondaryStatus": "the job's secondary status",
    "FailureReason": "why it failed (masked)",
    "CreationTime": "the record's times",
    "TrainingStartTime": "the record's times",
    "TrainingEndTime": "the record's times",
    "LastModifiedTime": "the record's times",
    "SecondaryStatusTransitions": "the recorded transitions",
    "ModelArtifacts": "the job's recorded model artifact",
    "Artifacts": "every artifact the job wrote",
    "FinalMetricDataList": "the last value of each metric",
    "TrainingTimeInSeconds": "the record's seconds",
    "BillableTimeInSeconds": "the record's seconds",
    "Interruptions": "spot interruptions so far",
    "ManagedSpotTrainingSavings": "from the billable and training seconds",
    "Cost": "from the seconds and the catalog's prices",
    "Attempt": "the job's attempt",
    "Hosts": "the attempt's hosts",
    "ProfilingStatus": "whether the spec profiles",
    "ProfilerRuleEvaluationStatuses": "the store's rule evaluations",
    "DebugOutputPath": "from the hook and the job's output prefix",
    "DebugRuleConfigurations": "the spec's debugger and custom rules",
    "DebugRuleEvaluationStatuses": "the store's rule evaluations",
}


def rest_sections(view: Any, shown: Shown) -> dict[str, Any]:
    """The REST describe's keys that :data:`MEMBERS` derive from the submitted job ``view``
    (``SubmittedJob``): each member's value at its spec path, made by its ``to_rest``, at its
    ``rest`` path; a member of a section the job has not got (no checkpoint) makes that section
    null. Members shown by another view (``rest_by``) are left to it."""
    sections: dict[str, Any] = {}
    for member, spec_path, parents, key in _shown_members(MEMBERS):
        into = _section(sections, parents)
        value = _spec_value(view, spec_path)
        if value is _NO_SECTION:
            if parents and into == {}:
                _section(sections, parents[:-1])[parents[-1]] = None
            continue
        if into is not None and (shown_value := member.to_rest(value, shown)) is not OMIT:
            into[key] = shown_value
    return sections


_NO_SECTION = object()  # a spec field below a section the job has not got
_Shown = tuple[Member, tuple[str, ...], tuple[str, ...], str]
_layout: list[tuple[tuple[Member, ...], tuple[_Shown, ...]]] = []


def _shown_members(members: tuple[Member, ...]) -> tuple[_Shown, ...]:
    """The members :func:`rest_sections` shows, each with its spec path's parts, its ``rest``
    path's sections and key: split once per declaration, not on every describe."""
    if not _layout or _layout[0][0] is not members:
        shown = tuple(
            (m, tuple(m.spec.split(".")), tuple(m.rest.split(".")[:-1]), m.rest.split(".")[-1])
            for m in members
            if m.rest is not None and m.rest_by is None
        )
        _layout[:] = [(members, shown)]
    return _layout[0][1]


def _spec_value(view: Any, parts: tuple[str, ...]) -> Any:
    found = view
    for part in parts:
        if found is None:
            return _NO_SECTION
        found = getattr(found, part)
    return found


def _section(sections: dict[str, Any], parents: tuple[str, ...]) -> Any:
    """The dict at ``parents`` of ``sections``, made where missing (``None`` where a member
    before made that section null)."""
    into: Any = sections
    for part in parents:
        if into is None:
            return None
        into = into.setdefault(part, {})
    return into


def split_trainops(described: Mapping[str, Any]) -> dict[str, Any]:
    """``described`` (DescribeTrainingJob's answer before the wire) as ``trainops describe``
    prints it: :data:`TRAINOPS_ONLY` moved under :data:`TRAINOPS_KEY`, absent members left out."""
    api: dict[str, Any] = _without_nulls(described)
    own: dict[str, Any] = {}
    for path in TRAINOPS_ONLY:
        _move(api, own, path.split("."))
    return api | ({TRAINOPS_KEY: own} if own else {})


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _move(source: dict[str, Any], into: dict[str, Any], parts: list[str]) -> None:
    """Move the value at ``parts`` of ``source`` to the same path of ``into``; a part ending in
    ``[]`` moves it out of each item of that list (``into`` gets a list of the items' parts)."""
    head, rest = parts[0], parts[1:]
    key = head.removesuffix("[]")
    if key not in source:
        return
    if not rest:
        into[key] = source.pop(key)
    elif head.endswith("[]") and isinstance(source[key], list):
        items: list[dict[str, Any]] = into.setdefault(key, [{} for _ in source[key]])
        for item, moved in zip(source[key], items, strict=True):
            if isinstance(item, dict):
                _move(item, moved, rest)
        if not any(items):
            del into[key]
    elif isinstance(source[key], dict):
        below = into.setdefault(key, {})
        _move(source[key], below, rest)
        if not below:
            del into[key]


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


def kept_of(body: Mapping[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """The members of ``body`` at ``paths`` (those it has), nested as in ``body``."""
    kept: dict[str, Any] = {}
    for path in paths:
        value = at_path(body, path)
        if value is None:
            continue
        *sections, field = path.split(".")
        into = kept
        for section in sections:
            into = into.setdefault(section, {})
        into[field] = value
    return kept


def with_kept(answer: Mapping[str, Any], kept: Mapping[str, Any]) -> dict[str, Any]:
    """``answer`` with ``kept`` laid over it: a kept object's members merged into the answer's
    object at the same path, any other kept value in place of the answer's."""
    merged = dict(answer)
    for key, value in kept.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = with_kept(below, value)
        else:
            merged[key] = value
    return merged
