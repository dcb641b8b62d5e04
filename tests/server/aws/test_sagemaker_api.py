"""The SageMaker API on the server's port, driven by botocore's own client (the one boto3 hands
out): describe with its waiter, list with its paginator, stop; the service's errors; signatures
refused over HTTP; hostile bodies; and the REST API beside it untouched."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError

from tests.control._harness import ControlPlane, control_plane
from tests.server.aws._clients import aws_error, sagemaker_client, send, signed_request
from trainops._settings import Settings
from trainops.server.aws import AwsCredentials, derive_credentials

pytestmark = pytest.mark.slow

WAIT = {"Delay": 1, "MaxAttempts": 120}
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311"


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


def _creds(plane: ControlPlane) -> AwsCredentials:
    assert plane.server.token is not None
    return derive_credentials(plane.server.token)


def _client(plane: ControlPlane) -> Any:
    return sagemaker_client(plane.server.url, _creds(plane))


def _code(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    error = caught.value.response["Error"]
    return (
        error["Code"],
        error["Message"],
        caught.value.response["ResponseMetadata"]["HTTPStatusCode"],
    )


def test_describe_waits_for_a_job_in_the_api_shape(plane: ControlPlane) -> None:
    plane.submit(
        "wired",
        {"FAKE_LINES": "2"},
        inputs={"train": {"uri": "file:///data/train/", "distribution": "sharded"}},
    )
    client = _client(plane)
    client.get_waiter("training_job_completed_or_stopped").wait(
        TrainingJobName="wired", WaiterConfig=WAIT
    )
    job = client.describe_training_job(TrainingJobName="wired")
    assert job["TrainingJobStatus"] == "Completed"
    assert job["TrainingJobArn"] == "arn:aws:sagemaker:us-east-1:000000000000:training-job/wired"
    assert isinstance(job["CreationTime"], datetime)  # epoch seconds on the wire, parsed
    assert job["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    source = job["InputDataConfig"][0]["DataSource"]["S3DataSource"]
    assert source["S3Uri"] == "file:///data/train/"
    assert source["S3DataDistributionType"] == "ShardedByS3Key"
    assert "Cost" not in job and "Hosts" not in job  # ours, not the API's
    statuses = [t["Status"] for t in job["SecondaryStatusTransitions"]]
    assert statuses[-1] == "Completed"


def _create_request(plane: ControlPlane, name: str, **changes: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "HyperParameters": {
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": json.dumps(plane.code_uri),
            "sagemaker_region": '"us-east-1"',
            "epochs": "3",
        },
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": "file:///data/train/",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": plane.server.settings.default_output_uri},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "Environment": {"FAKE_LINES": "1"},
    }
    return request | changes


def test_create_runs_a_job_and_a_duplicate_is_in_use(plane: ControlPlane) -> None:
    client = _client(plane)
    answer = client.create_training_job(**_create_request(plane, "made"))
    assert answer["TrainingJobArn"].endswith(":training-job/made")
    client.get_waiter("training_job_completed_or_stopped").wait(
        TrainingJobName="made", WaiterConfig=WAIT
    )
    job = client.describe_training_job(TrainingJobName="made")
    assert job["TrainingJobStatus"] == "Completed"
    sent = _create_request(plane, "made")
    # given back as sent, as the service does (the SDK's attach reads them)
    assert job["HyperParameters"] == sent["HyperParameters"]
    assert job["RoleArn"] == sent["RoleArn"]
    assert job["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert job["ResourceConfig"]["VolumeSizeInGB"] == 1
    assert job["OutputDataConfig"]["KmsKeyId"] == ""
    assert job["StoppingCondition"]["MaxRuntimeInSeconds"] == 600
    assert "RetryStrategy" not in job  # none asked for: left out, as the service does
    source = job["InputDataConfig"][0]["DataSource"]["S3DataSource"]
    assert source["S3DataDistributionType"] == "ShardedByS3Key"
    other_role = "arn:aws:iam::123456789012:role/Other"
    with pytest.raises(ClientError) as caught:
        client.create_training_job(**_create_request(plane, "made", RoleArn=other_role))
    code, message, status = _code(caught)
    assert (code, status) == ("ResourceInUse", 400)
    assert message.startswith("Training job names must be unique within an AWS account")
    assert client.describe_training_job(TrainingJobName="made")["RoleArn"] == sent["RoleArn"]


def test_create_refuses_what_it_cannot_run(plane: ControlPlane) -> None:
    client = _client(plane)
    image = {"TrainingImage": "example.com/mine:1", "TrainingInputMode": "File"}
    for changes, words in [
        ({"AlgorithmSpecification": image}, "has no mapping on this trainops server"),
        ({"HyperParameters": {"sagemaker_program": "t.py"}}, "no sagemaker_submit_directory"),
        ({"EnableManagedSpotTraining": True}, "max_wait_time_in_seconds"),  # spot needs MaxWait
        ({"RoleArn": "not-a-role-arn-at-all-no"}, "at 'roleArn' failed to satisfy constraint"),
    ]:
        with pytest.raises(ClientError) as caught:
            client.create_training_job(**_create_request(plane, "refused", **changes))
        code, message, status = _code(caught)
        assert (code, status) == ("ValidationException", 400)
        assert words in message
    with pytest.raises(ClientError) as caught:
        client.describe_training_job(TrainingJobName="refused")
    assert _code(caught)[1] == "Requested resource not found."


def test_a_managed_spot_request_makes_a_spot_job(plane: ControlPlane) -> None:
    client = _client(plane)
    stopping = {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200}
    request = _create_request(plane, "spotty", StoppingCondition=stopping)
    client.create_training_job(EnableManagedSpotTraining=True, **request)
    client.get_waiter("training_job_completed_or_stopped").wait(
        TrainingJobName="spotty", WaiterConfig=WAIT
    )
    job = client.describe_training_job(TrainingJobName="spotty")
    assert job["EnableManagedSpotTraining"] is True
    assert job["StoppingCondition"] == stopping
    assert job["BillableTimeInSeconds"] <= job["TrainingTimeInSeconds"]


def test_a_missing_job_is_not_found_as_the_service_says(plane: ControlPlane) -> None:
    client = _client(plane)
    with pytest.raises(ClientError) as caught:
        client.describe_training_job(TrainingJobName="nowhere")
    assert _code(caught) == ("ValidationException", "Requested resource not found.", 400)
    with pytest.raises(ClientError) as caught:
        client.stop_training_job(TrainingJobName="nowhere")
    assert _code(caught)[0] == "ValidationException"


def test_list_pages_filters_and_sorts(plane: ControlPlane) -> None:
    names = ("list-b", "list-a", "list-c", "other")
    for name in names:  # created in this order, run side by side
        plane.submit(name, {"FAKE_LINES": "1"})
    for name in names:
        plane.wait_ended(name)
    client = _client(plane)
    pages = client.get_paginator("list_training_jobs").paginate(
        NameContains="list", SortBy="Name", SortOrder="Ascending", PaginationConfig={"PageSize": 2}
    )
    seen = [[s["TrainingJobName"] for s in page["TrainingJobSummaries"]] for page in pages]
    assert seen == [["list-a", "list-b"], ["list-c"]]
    newest = client.list_training_jobs(MaxResults=1)["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in newest] == ["other"]
    assert client.list_training_jobs(StatusEquals="Failed")["TrainingJobSummaries"] == []
    deep = base64.urlsafe_b64encode(b"[" * 6000).decode()  # past the JSON decoder's recursion
    for token in ("not-a-token", deep):
        with pytest.raises(ClientError) as caught:
            client.list_training_jobs(NextToken=token)
        assert _code(caught) == ("ValidationException", "Invalid pagination token", 400)


def test_stop_stops_and_a_second_stop_is_refused(plane: ControlPlane) -> None:
    plane.submit("halt", {"FAKE_HANG_ATTEMPTS": "1"})
    plane.wait_secondary("halt", "Training")
    client = _client(plane)
    client.stop_training_job(TrainingJobName="halt")
    client.get_waiter("training_job_completed_or_stopped").wait(
        TrainingJobName="halt", WaiterConfig=WAIT
    )
    assert client.describe_training_job(TrainingJobName="halt")["TrainingJobStatus"] == "Stopped"
    with pytest.raises(ClientError) as caught:
        client.stop_training_job(TrainingJobName="halt")
    assert _code(caught) == (
        "ValidationException",
        "The request was rejected because the training job is in status Stopped.",
        400,
    )


def test_constraints_are_checked_by_the_server(plane: ControlPlane) -> None:
    with pytest.raises(ClientError) as caught:
        _client(plane).describe_training_job(TrainingJobName="a" * 64)
    code, message, status = _code(caught)
    assert (code, status) == ("ValidationException", 400)
    assert message.startswith("1 validation error detected: Value 'aaaa")
    assert "at 'trainingJobName' failed to satisfy constraint: Member must have length" in message


def test_signatures_are_refused_over_http(plane: ControlPlane) -> None:
    url, creds = plane.server.url, _creds(plane)
    wrong = sagemaker_client(url, AwsCredentials(creds.access_key_id, "w" * 40))
    with pytest.raises(ClientError) as caught:
        wrong.describe_training_job(TrainingJobName="x")
    assert _code(caught)[0] == "InvalidSignatureException"
    stranger = sagemaker_client(url, derive_credentials("not-the-token"))
    with pytest.raises(ClientError) as caught:
        stranger.list_training_jobs()
    assert _code(caught) == (
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
        403,
    )
    unsigned = sagemaker_client(url, creds, signed=False)
    with pytest.raises(ClientError) as caught:
        unsigned.list_training_jobs()
    assert _code(caught) == (
        "MissingAuthenticationTokenException",
        "Missing Authentication Token",
        403,
    )
    body = b'{"TrainingJobName": "x"}'
    request = signed_request(url, "SageMaker.DescribeTrainingJob", body, creds)
    tampered = send(request, body=b'{"TrainingJobName": "y"}')
    assert aws_error(tampered)[:2] == (403, "InvalidSignatureException")
    del request.headers["Authorization"]
    assert aws_error(send(request))[:2] == (403, "MissingAuthenticationTokenException")


def test_an_unknown_operation_or_service(plane: ControlPlane) -> None:
    url, creds = plane.server.url, _creds(plane)
    response = send(signed_request(url, "SageMaker.LaunchRockets", b"{}", creds))
    assert aws_error(response)[:2] == (400, "UnknownOperationException")
    response = send(
        signed_request(url, "Kinesis_20131202.ListStreams", b"{}", creds, service="kinesis")
    )
    status, code, message = aws_error(response)
    assert (status, code) == (403, "InvalidSignatureException")
    assert "scoped to correct service: 'kinesis'" in message


def test_hostile_bodies(plane: ControlPlane) -> None:
    url, creds = plane.server.url, _creds(plane)
    deep = b"[" * 200_000 + b"]" * 200_000
    response = send(signed_request(url, "SageMaker.ListTrainingJobs", deep, creds))
    assert aws_error(response)[:2] == (400, "SerializationException")
    nested = json.dumps({"TrainingJobName": "a", "X": [[[[[[]]]]]]}).encode()
    response = send(signed_request(url, "SageMaker.DescribeTrainingJob", nested, creds))
    assert response.status_code == 400  # the job is missing; the stray member is ignored


def test_a_huge_body_is_refused_before_it_is_sent(plane: ControlPlane) -> None:
    """Only the headers go out: the answer must come without the server reading a body."""
    request = signed_request(plane.server.url, "SageMaker.ListTrainingJobs", b"{}", _creds(plane))
    parts = urlsplit(plane.server.url)
    lines = ["POST / HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {10**9}"]
    lines += [f"{k}: {v}" for k, v in request.headers.items() if k.lower() != "content-length"]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = conn.recv(65536).decode("latin-1")
    assert head.startswith("HTTP/1.1 413 ")
    assert "RequestEntityTooLargeException" in head


def test_the_rest_api_is_untouched(plane: ControlPlane) -> None:
    response = plane.client.get("/api/v1/jobs")
    assert response.status_code == 200
    assert "jobs" in response.json()
