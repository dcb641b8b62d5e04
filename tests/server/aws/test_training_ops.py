"""UpdateTrainingJob and the tag operations on the server's port, driven by botocore's own client:
rules added to a running job reach the rules service; what cannot change is refused in words; tags
given at CreateTrainingJob, added, overwritten, listed and deleted, with the service's limits;
ListTrainingJobs' every filter; and a spec's SageMaker SDK habits over the REST API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.control._harness import ControlPlane, control_plane, wait_for
from tests.server.aws._clients import aws_error, sagemaker_client, send, signed_request
from tests.server.aws.test_sagemaker_api import _create_request
from trainops._settings import Settings
from trainops.server.aws import derive_credentials

pytestmark = pytest.mark.slow

ARN = "arn:aws:sagemaker:us-east-1:000000000000:training-job/{}"
IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


def _client(plane: ControlPlane) -> Any:
    assert plane.server.token is not None
    return sagemaker_client(plane.server.url, derive_credentials(plane.server.token))


def _refused(call: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    error = caught.value.response["Error"]
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return error["Code"], error["Message"]


def _rule(name: str, rule: str, **params: str) -> dict[str, Any]:
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": IMAGE,
        "RuleParameters": {"rule_to_invoke": rule, **params},
    }


def _evaluated(plane: ControlPlane, job: str) -> set[str]:
    return {row.name for row in plane.server.controller.store.rule_evaluations(job)}


def test_a_profiler_rule_added_to_a_running_job_is_evaluated(plane: ControlPlane) -> None:
    plane.submit("profiled", {"FAKE_HANG_ATTEMPTS": "1"}, rules=["CPUBottleneck"])
    plane.wait_secondary("profiled", "Training")
    wait_for(lambda: "CPUBottleneck" in _evaluated(plane, "profiled"), what="the first rule")
    client = _client(plane)
    answer = client.update_training_job(
        TrainingJobName="profiled",
        ProfilerRuleConfigurations=[_rule("late-io", "IOBottleneck", threshold="70")],
        ResourceConfig={"KeepAlivePeriodInSeconds": 0},
    )
    assert answer["TrainingJobArn"] == ARN.format("profiled")
    wait_for(lambda: "late-io" in _evaluated(plane, "profiled"), what="the added rule tracked")
    job = client.describe_training_job(TrainingJobName="profiled")
    added = job["ProfilerRuleConfigurations"][-1]
    assert added["RuleConfigurationName"] == "late-io"
    assert added["RuleParameters"]["rule_to_invoke"] == "IOBottleneck"
    assert added["RuleParameters"]["threshold"] == "70"
    names = [s["RuleConfigurationName"] for s in job["ProfilerRuleEvaluationStatuses"]]
    assert names == ["CPUBottleneck", "late-io"]
    code, message = _refused(
        client.update_training_job,
        TrainingJobName="profiled",
        ProfilerRuleConfigurations=[_rule("late-io", "CPUBottleneck")],
    )
    assert code == "ValidationException"
    assert "has a rule named late-io already" in message
    for changes, words in [
        ({"ResourceConfig": {"KeepAlivePeriodInSeconds": 60}}, "keeps no warm pools"),
        ({"ProfilerConfig": {"ProfilingIntervalInMilliseconds": 100}}, "cannot be changed"),
        ({"RemoteDebugConfig": {"EnableRemoteDebug": True}}, "not supported"),
        (
            {
                "ProfilerRuleConfigurations": [
                    {"RuleConfigurationName": "x", "RuleEvaluatorImage": IMAGE}
                ]
            },
            "has no rule_to_invoke",
        ),
        ({"ProfilerRuleConfigurations": [_rule("nope", "NoSuchRule")]}, "NoSuchRule"),
        (
            {"ProfilerRuleConfigurations": [_rule("grad", "VanishingGradient")]},
            "VanishingGradient is a debugger rule, not a profiler rule",
        ),
        (
            {"ProfilerRuleConfigurations": [_rule("io2", "IOBottleneck", source="../../x.py")]},
            "IOBottleneck has no parameter 'source'",
        ),
    ]:
        code, message = _refused(client.update_training_job, TrainingJobName="profiled", **changes)
        assert code == "ValidationException"
        assert words in message, message
    # The job's own profiler settings again are no change.
    client.update_training_job(
        TrainingJobName="profiled",
        ProfilerConfig={"ProfilingIntervalInMilliseconds": 500, "DisableProfiler": False},
    )
    client.stop_training_job(TrainingJobName="profiled")
    plane.wait_ended("profiled")
    code, message = _refused(
        client.update_training_job,
        TrainingJobName="profiled",
        ProfilerRuleConfigurations=[_rule("too-late", "LoadBalancing")],
    )
    assert (code, message) == (
        "ValidationException",
        "The request was rejected because the training job is in status Stopped.",
    )


def test_profiler_rules_need_a_job_that_profiles(plane: ControlPlane) -> None:
    plane.submit("plain", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("plain", "Training")
    client = _client(plane)
    code, message = _refused(
        client.update_training_job,
        TrainingJobName="plain",
        ProfilerRuleConfigurations=[_rule("cpu", "CPUBottleneck")],
    )
    assert code == "ValidationException"
    assert "hosts run without the profiler" in message
    assert _evaluated(plane, "plain") == set()
    code, message = _refused(client.update_training_job, TrainingJobName="nowhere")
    assert (code, message) == ("ValidationException", "Requested resource not found.")
    client.stop_training_job(TrainingJobName="plain")


def test_create_takes_profiler_rules_in_the_sdk_s_shape(plane: ControlPlane) -> None:
    client = _client(plane)
    request = _create_request(
        plane,
        "sdk-rules",
        ProfilerConfig={
            "ProfilingIntervalInMilliseconds": 1000,
            "S3OutputPath": plane.server.settings.default_output_uri + "/",
        },
        ProfilerRuleConfigurations=[_rule("ProfilerReport-1700000000", "ProfilerReport")],
    )
    client.create_training_job(**request)
    job = client.describe_training_job(TrainingJobName="sdk-rules")
    assert job["ProfilingStatus"] == "Enabled"
    rules = job["ProfilerRuleConfigurations"]
    assert [r["RuleConfigurationName"] for r in rules] == ["ProfilerReport-1700000000"]
    spec = plane.server.controller.store.get_job("sdk-rules")
    assert spec is not None and spec.spec.profiler_config is not None
    assert spec.spec.profiler_config.system_monitor_interval_millis == 1000
    base = plane.server.settings.default_output_uri
    assert spec.spec.profiler_config.s3_output_path == f"{base}/sdk-rules/profiler-output"


def test_tags_from_create_add_list_and_delete(plane: ControlPlane) -> None:
    client = _client(plane)
    tags = [{"Key": "team", "Value": "vision"}, {"Key": "stage", "Value": "dev"}]
    client.create_training_job(**_create_request(plane, "Tagged-Job"), Tags=tags)
    arn = ARN.format("tagged-job")  # the service writes the name in lower case
    assert client.list_tags(ResourceArn=arn)["Tags"] == sorted(tags, key=lambda t: t["Key"])
    added = client.add_tags(
        ResourceArn=arn, Tags=[{"Key": "stage", "Value": "prod"}, {"Key": "owner", "Value": ""}]
    )
    assert added["Tags"] == [{"Key": "stage", "Value": "prod"}, {"Key": "owner", "Value": ""}]
    listed = {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=arn)["Tags"]}
    assert listed == {"team": "vision", "stage": "prod", "owner": ""}
    pages = client.get_paginator("list_tags").paginate(ResourceArn=arn)
    assert sum(len(page["Tags"]) for page in pages) == 3
    client.delete_tags(ResourceArn=arn, TagKeys=["team", "never-there"])
    assert {t["Key"] for t in client.list_tags(ResourceArn=arn)["Tags"]} == {"stage", "owner"}


def test_a_create_whose_tags_cannot_be_written_leaves_no_job_behind(plane: ControlPlane) -> None:
    """The job, its tags and its kept request are one transaction: the tags' write fails here
    (tags left under the name would go over the limit), so none of them is recorded."""
    store = plane.server.controller.store
    store.put_tags("training-job", "doomed", {f"k{i}": "v" for i in range(50)}, 50)
    code, message = _refused(
        _client(plane).create_training_job,
        **_create_request(plane, "doomed"),
        Tags=[{"Key": "team", "Value": "vision"}],
    )
    assert (code, message) == (
        "ResourceLimitExceeded",
        "A resource can have at most 50 tags; this request would give it 51.",
    )
    assert store.get_job("doomed") is None
    assert store.transitions("doomed") == []
    assert store.api_request("training-job", "doomed") == {}
    assert dict(store.tags("training-job", "doomed")) == {f"k{i}": "v" for i in range(50)}
    assert [j.name for j in store.list_jobs()] == []  # nothing queued or placed either


def test_the_service_s_tag_limits_and_words(plane: ControlPlane) -> None:
    plane.submit("limits", {"FAKE_LINES": "1"})
    client = _client(plane)
    arn = ARN.format("limits")
    client.add_tags(ResourceArn=arn, Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(49)])
    code, message = _refused(
        client.add_tags,
        ResourceArn=arn,
        Tags=[{"Key": "x", "Value": ""}, {"Key": "y", "Value": ""}],
    )
    assert code == "ResourceLimitExceeded"
    assert "at most 50 tags" in message
    assert len(client.list_tags(ResourceArn=arn)["Tags"]) == 49  # nothing of it written
    client.add_tags(ResourceArn=arn, Tags=[{"Key": "k0", "Value": "Größe 3 ü"}])  # overwrites
    tags = {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=arn)["Tags"]}
    assert tags["k0"] == "Größe 3 ü" and len(tags) == 49
    for key in ("aws:owner", "AWS:Owner"):
        code, message = _refused(client.add_tags, ResourceArn=arn, Tags=[{"Key": key, "Value": ""}])
        assert code == "ValidationException"
        assert "reserved for internal use" in message
    code, message = _refused(
        client.create_training_job,
        **_create_request(plane, "reserved"),
        Tags=[{"Key": "aws:cloudformation:stack-name", "Value": "s"}],
    )
    assert "reserved for internal use" in message
    assert plane.server.controller.store.get_job("reserved") is None  # refused before it was made
    code, message = _refused(
        client.add_tags, ResourceArn=arn, Tags=[{"Key": "bad<key>", "Value": ""}]
    )
    assert "at 'tags.1.member.key' failed to satisfy constraint" in message
    for other in (
        ARN.format("nowhere"),
        "arn:aws:sagemaker:eu-west-1:000000000000:training-job/limits",
        "arn:aws:sagemaker:us-east-1:123456789012:training-job/limits",
        "arn:aws:sagemaker:us-east-1:000000000000:model/limits",
        "arn:aws:sagemaker:us-east-1:000000000000:training-job/limits/../x",
        "arn:aws:sagemaker:us-east-1:000000000000:training-job/x' OR '1'='1",
        "arn:aws:sagemaker:us-east-1:000000000000:training-job/%",
    ):
        code, message = _refused(client.list_tags, ResourceArn=other)
        assert (code, message) == ("ValidationException", "Requested resource not found."), other


def test_list_filters_every_window_and_sort(plane: ControlPlane) -> None:
    for name in ("win-a", "win-b"):
        plane.submit(name, {"FAKE_LINES": "1"})
        plane.wait_ended(name)
    plane.submit("win-c", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("win-c", "Training")
    client = _client(plane)

    def names(**filters: Any) -> list[str]:
        found = client.list_training_jobs(NameContains="win", **filters)["TrainingJobSummaries"]
        return [s["TrainingJobName"] for s in found]

    times = {
        s["TrainingJobName"]: s
        for s in client.list_training_jobs(NameContains="win")["TrainingJobSummaries"]
    }
    assert names() == ["win-c", "win-b", "win-a"]  # newest first by default
    assert names(SortBy="CreationTime", SortOrder="Ascending") == ["win-a", "win-b", "win-c"]
    assert names(SortBy="Status", SortOrder="Ascending")[0] == "win-a"  # Completed < InProgress
    b_created = times["win-b"]["CreationTime"]
    assert names(CreationTimeAfter=b_created, SortOrder="Ascending") == ["win-c"]
    assert names(CreationTimeBefore=b_created) == ["win-a"]
    a_modified = times["win-a"]["LastModifiedTime"]
    assert "win-a" not in names(LastModifiedTimeAfter=a_modified)
    assert names(LastModifiedTimeBefore=a_modified) == []
    assert names(StatusEquals="InProgress") == ["win-c"]
    plan = "arn:aws:sagemaker:us-east-1:000000000000:training-plan/some-plan-of-mine-0001"
    assert names(TrainingPlanArnEquals=plan) == ["win-c", "win-b", "win-a"]  # ignored
    assert names(WarmPoolStatusEquals="Available") == []  # no job here has a warm pool
    creds = derive_credentials(str(plane.server.token))
    for bound, status in ((b"1e300", 200), (b"-1e300", 200), (b"Infinity", 400), (b"NaN", 400)):
        body = b'{"NameContains": "win", "CreationTimeAfter": ' + bound + b"}"
        request = signed_request(plane.server.url, "SageMaker.ListTrainingJobs", body, creds)
        response = send(request)
        assert response.status_code == status, response.text
        if status == 400:
            assert aws_error(response)[1] == "SerializationException"
        else:
            names_found = [s["TrainingJobName"] for s in response.json()["TrainingJobSummaries"]]
            assert names_found == ([] if bound == b"1e300" else ["win-c", "win-b", "win-a"])
    client.stop_training_job(TrainingJobName="win-c")


def test_sdk_arguments_without_effect_come_back_as_warnings(plane: ControlPlane) -> None:
    """A spec sent as written (the CLI sends a YAML file's fields) keeps the SDK's habits: the
    arguments with no effect come back as one-line warnings, the mapped ones set their fields."""
    created = plane.submit(
        "habits", {"FAKE_LINES": "1"}, role="arn:aws:iam::1:role/r", max_run=77, py_version="py311"
    )
    warnings = created["Warnings"]
    assert any(w.startswith("role is accepted and not used: ") for w in warnings)
    assert any(w.startswith("py_version is accepted and not used: ") for w in warnings)
    assert plane.describe("habits")["StoppingCondition"]["MaxRuntimeInSeconds"] == 77


def test_a_tuning_job_s_arn_takes_tags_too(plane: ControlPlane) -> None:
    store = plane.server.controller.store
    store.create_tuning_job("Sweep-1", {"name": "Sweep-1"}, plane.code_uri, now=1.0)
    arn = "arn:aws:sagemaker:us-east-1:000000000000:hyper-parameter-tuning-job/sweep-1"
    client = _client(plane)
    client.add_tags(ResourceArn=arn, Tags=[{"Key": "study", "Value": "lr"}])
    assert client.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "study", "Value": "lr"}]
    assert store.tags("hyper-parameter-tuning-job", "Sweep-1") == [("study", "lr")]
    assert store.tags("training-job", "Sweep-1") == []  # kinds never share tags
