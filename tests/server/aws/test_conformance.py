"""Conformance of every registered AWS operation with its botocore model: a sample request of
each is accepted, every required member is enforced, the constraints are worded as the service
words them, and no model pattern can be made to backtrack for long by a value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trainops.server.aws import AWS_SERVICES, AwsError, AwsService, validate
from trainops.server.aws._validation import _compiled

# One accepted request per registered operation: a new operation must add its sample here.
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311"
SAMPLES: dict[str, dict[str, Any]] = {
    "CreateTrainingJob": {
        "TrainingJobName": "my-job-1",
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "HyperParameters": {"sagemaker_program": '"train.py"', "epochs": "3"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://bucket/train/"}
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CheckpointConfig": {"S3Uri": "s3://bucket/ckpt/"},
        "RetryStrategy": {"MaximumRetryAttempts": 1},
    },
    "DescribeTrainingJob": {"TrainingJobName": "my-job-1"},
    "StopTrainingJob": {"TrainingJobName": "my-job-1"},
    "UpdateTrainingJob": {
        "TrainingJobName": "my-job-1",
        "ProfilerRuleConfigurations": [
            {
                "RuleConfigurationName": "CPUBottleneck",
                "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
                "RuleParameters": {"rule_to_invoke": "CPUBottleneck", "threshold": "50"},
            }
        ],
        "ProfilerConfig": {"ProfilingIntervalInMilliseconds": 500, "DisableProfiler": False},
        "ResourceConfig": {"KeepAlivePeriodInSeconds": 0},
    },
    "AddTags": {
        "ResourceArn": "arn:aws:sagemaker:us-east-1:000000000000:training-job/my-job-1",
        "Tags": [{"Key": "team", "Value": "vision"}, {"Key": "cost center:=+-@/.", "Value": ""}],
    },
    "ListTags": {
        "ResourceArn": "arn:aws:sagemaker:us-east-1:000000000000:training-job/my-job-1",
        "MaxResults": 50,
    },
    "DeleteTags": {
        "ResourceArn": "arn:aws:sagemaker:us-east-1:000000000000:training-job/my-job-1",
        "TagKeys": ["team"],
    },
    "ListTrainingJobs": {
        "MaxResults": 5,
        "NameContains": "job",
        "StatusEquals": "Completed",
        "SortBy": "Name",
        "SortOrder": "Ascending",
        "CreationTimeAfter": 1_700_000_000,
        "NextToken": "abc",
        "WarmPoolStatusEquals": "Available",
    },
    "CreateHyperParameterTuningJob": {
        "HyperParameterTuningJobName": "my-tuning-1",
        "HyperParameterTuningJobConfig": {
            "Strategy": "Bayesian",
            "HyperParameterTuningJobObjective": {"Type": "Minimize", "MetricName": "loss"},
            "ResourceLimits": {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2},
            "ParameterRanges": {
                "ContinuousParameterRanges": [
                    {"Name": "lr", "MinValue": "0.001", "MaxValue": "0.1"}
                ]
            },
        },
        "TrainingJobDefinition": {
            "StaticHyperParameters": {"sagemaker_program": '"train.py"'},
            "AlgorithmSpecification": {
                "TrainingImage": IMAGE,
                "TrainingInputMode": "File",
                "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
            },
            "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
            "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
            "ResourceConfig": {
                "InstanceType": "ml.m5.large",
                "InstanceCount": 1,
                "VolumeSizeInGB": 1,
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        },
        "Tags": [{"Key": "team", "Value": "vision"}],
    },
    "DescribeHyperParameterTuningJob": {"HyperParameterTuningJobName": "my-tuning-1"},
    "StopHyperParameterTuningJob": {"HyperParameterTuningJobName": "my-tuning-1"},
    "ListHyperParameterTuningJobs": {
        "MaxResults": 5,
        "NameContains": "tuning",
        "StatusEquals": "Completed",
        "SortBy": "Name",
        "SortOrder": "Ascending",
        "CreationTimeAfter": 1_700_000_000,
        "NextToken": "abc",
    },
    "ListTrainingJobsForHyperParameterTuningJob": {
        "HyperParameterTuningJobName": "my-tuning-1",
        "MaxResults": 5,
        "StatusEquals": "Completed",
        "SortBy": "FinalObjectiveMetricValue",
        "SortOrder": "Descending",
        "NextToken": "abc",
    },
    "GetCallerIdentity": {},
    "GetRole": {"RoleName": "SageMakerRole"},
    "SimulatePrincipalPolicy": {
        "PolicySourceArn": "arn:aws:iam::000000000000:role/SageMakerRole",
        "ActionNames": ["sagemaker:CreateTrainingJob"],
    },
    "DescribeLogStreams": {
        "logGroupName": "/aws/sagemaker/TrainingJobs",
        "logStreamNamePrefix": "my-job-1/",
        "orderBy": "LogStreamName",
        "descending": False,
        "limit": 50,
    },
    "GetLogEvents": {
        "logGroupName": "/aws/sagemaker/TrainingJobs",
        "logStreamName": "my-job-1/algo-1-1700000000",
        "startTime": 1_700_000_000_000,
        "startFromHead": True,
        "limit": 100,
        "nextToken": "f/0",
    },
    "FilterLogEvents": {
        "logGroupName": "/aws/sagemaker/TrainingJobs",
        "logStreamNames": ["my-job-1/algo-1-1700000000"],
        "filterPattern": "ERROR",
        "limit": 100,
    },
    "GetMetricStatistics": {
        "Namespace": "/aws/sagemaker/TrainingJobs",
        "MetricName": "loss",
        "Dimensions": [{"Name": "TrainingJobName", "Value": "my-job-1"}],
        "StartTime": 1_700_000_000,
        "EndTime": 1_700_003_600,
        "Period": 60,
        "Statistics": ["Average"],
    },
    "ListMetrics": {
        "Namespace": "/aws/sagemaker/TrainingJobs",
        "Dimensions": [{"Name": "TrainingJobName", "Value": "my-job-1"}],
    },
}


def _services() -> list[AwsService]:
    # Every registered service; its handlers are not called here (the shapes are checked).
    return [make(None, None) for make in AWS_SERVICES.values()]  # type: ignore[arg-type]


def _operations() -> Iterator[tuple[AwsService, str]]:
    for service in _services():
        for name in service.operations:
            yield service, name


OPERATIONS = [pytest.param(s, n, id=f"{s.signing_name}.{n}") for s, n in _operations()]


def _errors(body: Any, shape: Any) -> str:
    with pytest.raises(AwsError) as caught:
        validate(body, shape)
    assert caught.value.code == "ValidationException"
    assert caught.value.status == 400
    return caught.value.message


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
def test_the_sample_request_is_accepted(service: AwsService, name: str) -> None:
    validate(SAMPLES[name], service.operation_model(name).input_shape)


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
def test_every_required_member_is_enforced(service: AwsService, name: str) -> None:
    shape = service.operation_model(name).input_shape
    for member in shape.required_members:
        body = {k: v for k, v in SAMPLES[name].items() if k != member}
        path = member[0].lower() + member[1:]
        message = _errors(body, shape)
        assert f"Value null at '{path}' failed to satisfy constraint: Member must not be null" in (
            message
        )


def test_constraints_are_worded_as_the_service_words_them() -> None:
    service = _services()[0]
    describe = service.operation_model("DescribeTrainingJob").input_shape
    assert _errors({"TrainingJobName": "bad_name!"}, describe) == (
        "1 validation error detected: Value 'bad_name!' at 'trainingJobName' failed to satisfy "
        "constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
    )
    assert "Member must have length less than or equal to 63" in _errors(
        {"TrainingJobName": "a" * 64}, describe
    )
    listing = service.operation_model("ListTrainingJobs").input_shape
    message = _errors({"MaxResults": 1000, "SortBy": "Size"}, listing)
    assert message.startswith("2 validation errors detected: ")
    assert "Value '1000' at 'maxResults' failed to satisfy constraint: Member must have value " in (
        message
    )
    assert "at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set: " in (
        message
    )


def test_a_wrong_type_or_a_deep_body_is_a_serialization_error() -> None:
    listing = _services()[0].operation_model("ListTrainingJobs").input_shape
    for body in ({"MaxResults": "5"}, {"MaxResults": True}, {"MaxResults": 1.5}, []):
        with pytest.raises(AwsError) as caught:
            validate(body, listing)
        assert caught.value.code == "SerializationException"


def _patterns(shape: Any, seen: set[str]) -> Iterator[tuple[str, int]]:
    if shape.name in seen:
        return
    seen.add(shape.name)
    if shape.type_name == "string" and "pattern" in shape.metadata:
        yield shape.metadata["pattern"], int(shape.metadata.get("max", 1024))
    for child in _children(shape):
        yield from _patterns(child, seen)


def _children(shape: Any) -> list[Any]:
    if shape.type_name == "structure":
        return list(shape.members.values())
    if shape.type_name == "list":
        return [shape.member]
    if shape.type_name == "map":
        return [shape.key, shape.value]
    return []


def _all_patterns() -> list[tuple[str, int]]:
    seen: set[str] = set()
    found: dict[str, int] = {}
    for service, name in _operations():
        for pattern, longest in _patterns(service.operation_model(name).input_shape, seen):
            found[pattern] = max(found.get(pattern, 0), longest)
    return sorted(found.items())


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("pattern", "longest"), _all_patterns())
def test_no_value_within_bounds_makes_a_pattern_backtrack(pattern: str, longest: int) -> None:
    compiled = _compiled(pattern)
    if compiled is None:
        return  # not enforced (documented): nothing to match
    # Classic killers: long runs of what a repeated group eats, then a character that fails.
    for unit in ("a", "-", "a-", "0", " ", "/", "."):
        value = (unit * longest)[: longest - 1] + "!"
        compiled.fullmatch(value)
