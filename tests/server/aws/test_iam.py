"""IAM on the server's port (query protocol, XML answers), driven by botocore's own client:
SimulatePrincipalPolicy, which the SageMaker SDK v3's ModelTrainer calls to check its role,
answers every action allowed; a malformed list and other IAM operations are refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.control._harness import ControlPlane, control_plane
from tests.server.aws._clients import aws_client, signed_form
from trainops._settings import Settings
from trainops.server.aws import derive_credentials

ROLE = "arn:aws:iam::000000000000:role/SageMakerRole"


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


def _iam(plane: ControlPlane) -> Any:
    assert plane.server.token is not None
    return aws_client("iam", plane.server.url, derive_credentials(plane.server.token))


def test_the_role_may_do_every_action_asked_about(plane: ControlPlane) -> None:
    actions = ["sagemaker:CreateTrainingJob", "s3:GetObject", "<x>&y"]
    answer = _iam(plane).simulate_principal_policy(PolicySourceArn=ROLE, ActionNames=actions)
    results = answer["EvaluationResults"]
    assert [r["EvalActionName"] for r in results] == actions  # in order; escaped and read back
    assert {r["EvalDecision"] for r in results} == {"allowed"}
    assert {r["EvalResourceName"] for r in results} == {"*"}
    assert answer["IsTruncated"] is False


def test_each_resource_asked_about_is_answered(plane: ControlPlane) -> None:
    answer = _iam(plane).simulate_principal_policy(
        PolicySourceArn=ROLE, ActionNames=["s3:GetObject"], ResourceArns=["arn:a", "arn:b"]
    )
    assert [r["EvalResourceName"] for r in answer["EvaluationResults"]] == ["arn:a", "arn:b"]


def test_another_iam_operation_is_refused(plane: ControlPlane) -> None:
    with pytest.raises(ClientError) as caught:
        _iam(plane).create_role(RoleName="r", AssumeRolePolicyDocument="{}")
    assert caught.value.response["Error"]["Code"] == "InvalidAction"


_FORM = b"Action=SimulatePrincipalPolicy&Version=2010-05-08&PolicySourceArn=" + ROLE.encode()


@pytest.mark.parametrize(
    ("form", "words"),
    [
        (  # a gap in the list's numbers
            _FORM + b"&ActionNames.member.1=s3:GetObject&ActionNames.member.3=s3:PutObject",
            "ActionNames: list items are not 1..n",
        ),
        (_FORM, "ActionNames"),  # required
        (_FORM + b"&ActionNames.member.1=s3", "ActionNames"),  # under the model's 3 characters
    ],
)
def test_a_malformed_simulation_is_refused_in_xml(
    plane: ControlPlane, form: bytes, words: str
) -> None:
    assert plane.server.token is not None
    creds = derive_credentials(plane.server.token)
    request = signed_form(plane.server.url, form, creds, service="iam")
    response = httpx.post(request.url, content=form, headers=dict(request.headers), timeout=30)
    assert response.status_code == 400
    assert response.text.startswith("<ErrorResponse")
    assert words.lower() in response.text.lower()  # the service words members in camelCase


def test_a_role_exists_and_trusts_sagemaker(plane: ControlPlane) -> None:
    role = _iam(plane).get_role(RoleName="SageMakerRole")["Role"]
    assert role["Arn"] == "arn:aws:iam::000000000000:role/SageMakerRole"
    document = role["AssumeRolePolicyDocument"]  # URL-encoded JSON, as IAM's: botocore reads it
    [statement] = document["Statement"]
    assert statement["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert (statement["Effect"], statement["Action"]) == ("Allow", "sts:AssumeRole")


def test_a_role_name_out_of_the_pattern_is_refused(plane: ControlPlane) -> None:
    with pytest.raises(ClientError) as caught:
        _iam(plane).get_role(RoleName="a/<b>")
    assert caught.value.response["Error"]["Code"] == "ValidationError"
