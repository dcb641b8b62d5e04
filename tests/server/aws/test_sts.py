"""STS on the server's port (the query protocol, XML answers), driven by botocore's own client:
GetCallerIdentity names the account our ARNs name; an unknown action and a bad signature are
refused in STS's XML error shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.control._harness import ControlPlane, control_plane
from tests.server.aws._clients import aws_client, signed_form
from trainops._settings import Settings
from trainops.server.aws import ACCOUNT_ID, derive_credentials


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


def _sts(plane: ControlPlane, **keys: Any) -> Any:
    assert plane.server.token is not None
    return aws_client("sts", plane.server.url, derive_credentials(plane.server.token), **keys)


def test_caller_identity_is_the_account_of_our_arns(plane: ControlPlane) -> None:
    identity = _sts(plane).get_caller_identity()
    assert identity["Account"] == ACCOUNT_ID
    assert identity["Arn"] == f"arn:aws:iam::{ACCOUNT_ID}:root"
    assert identity["UserId"] == ACCOUNT_ID
    assert identity["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_a_wrong_secret_is_refused_in_sts_words(plane: ControlPlane) -> None:
    assert plane.server.token is not None
    creds = derive_credentials(plane.server.token)
    wrong = type(creds)(creds.access_key_id, "not-the-secret")
    with pytest.raises(ClientError) as caught:
        aws_client("sts", plane.server.url, wrong).get_caller_identity()
    error = caught.value.response["Error"]
    assert error["Code"] == "SignatureDoesNotMatch"
    assert error["Type"] == "Sender"  # parsed from STS's own XML error shape
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


@pytest.mark.parametrize(
    "form",
    [
        b"Action=AssumeRole&Version=2011-06-15",
        b"Action=%3Cx%3E&Version=2011-06-15",
        b"Version=2011-06-15",
        b"\xff\xfe",
        b"&".join([b"a=b"] * 5000),
    ],
)
def test_a_hostile_form_is_refused_in_xml(plane: ControlPlane, form: bytes) -> None:
    assert plane.server.token is not None
    request = signed_form(plane.server.url, form, derive_credentials(plane.server.token))
    response = httpx.post(request.url, content=form, headers=dict(request.headers), timeout=30)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/xml")
    assert response.text.startswith("<ErrorResponse")
    assert "<Type>Sender</Type>" in response.text
    assert "<x>" not in response.text  # what the request said is escaped
