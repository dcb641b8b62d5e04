"""The SigV4 verifier against requests signed by botocore's own signer: accepted as signed, and
refused (in the service's words) when the secret, key, scope, date, headers or body differ."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.awsrequest import AWSRequest

from tests.server.aws._clients import signed_request
from trainops.server.aws import AwsCredentials, AwsError, Verifier, derive_credentials
from trainops.server.aws._sigv4 import parse_signature

CREDS = derive_credentials("the-server-token")
URL = "http://127.0.0.1:8470"
BODY = b'{"TrainingJobName": "a"}'


def _headers(request: AWSRequest) -> dict[str, str]:
    headers = {k.lower(): v for k, v in request.headers.items()}
    headers["host"] = "127.0.0.1:8470"  # what the HTTP client adds (SigV4 signed it)
    return headers


def _verify(
    request: AWSRequest,
    *,
    verifier: Verifier | None = None,
    body: bytes = BODY,
    now: datetime | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    verifier = verifier or Verifier(CREDS, "us-east-1")
    headers = headers or _headers(request)
    signed = parse_signature(headers)
    verifier.check_credential(signed, headers, now or datetime.now(UTC))
    verifier.verify(signed, ("POST", "/", ""), headers, body)


def _refusal(**kwargs: object) -> tuple[int, str, str]:
    request = kwargs.pop("request", None) or signed_request(
        URL, "SageMaker.DescribeTrainingJob", BODY, CREDS
    )
    with pytest.raises(AwsError) as caught:
        _verify(request, **kwargs)  # type: ignore[arg-type]
    return caught.value.status, caught.value.code, caught.value.message


def test_a_botocore_signature_is_accepted() -> None:
    _verify(signed_request(URL, "SageMaker.DescribeTrainingJob", BODY, CREDS))


def test_a_wrong_secret_is_refused_as_the_service_words_it() -> None:
    wrong = AwsCredentials(CREDS.access_key_id, "x" * 40)
    request = signed_request(URL, "SageMaker.DescribeTrainingJob", BODY, wrong)
    status, code, message = _refusal(request=request)
    assert (status, code) == (403, "InvalidSignatureException")
    assert message.startswith("The request signature we calculated does not match the signature")


def test_a_tampered_body_header_or_path_is_refused() -> None:
    request = signed_request(URL, "SageMaker.DescribeTrainingJob", BODY, CREDS)
    assert _refusal(request=request, body=b'{"TrainingJobName": "b"}')[1] == (
        "InvalidSignatureException"
    )
    headers = _headers(request) | {"x-amz-target": "SageMaker.StopTrainingJob"}
    assert _refusal(request=request, headers=headers)[1] == "InvalidSignatureException"
    headers = _headers(request) | {"host": "elsewhere:8470"}
    assert _refusal(request=request, headers=headers)[1] == "InvalidSignatureException"


def test_an_unknown_key_or_a_session_token_is_an_unrecognized_client() -> None:
    other = derive_credentials("another-token")
    request = signed_request(URL, "SageMaker.DescribeTrainingJob", BODY, other)
    assert _refusal(request=request) == (
        403,
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
    )
    request = signed_request(URL, "SageMaker.DescribeTrainingJob", BODY, CREDS)
    headers = _headers(request) | {"x-amz-security-token": "anything"}
    assert _refusal(request=request, headers=headers)[1] == "UnrecognizedClientException"
    # A server without a token issues no key: every signature is a stranger's.
    assert _refusal(verifier=Verifier(None, "us-east-1"))[1] == "UnrecognizedClientException"


def test_a_signature_outside_fifteen_minutes_is_expired() -> None:
    late = datetime.now(UTC) + timedelta(minutes=16)
    status, code, message = _refusal(now=late)
    assert (status, code) == (403, "InvalidSignatureException")
    assert message.startswith("Signature expired: ")
    assert message.endswith(" - 15 min.)")
    early = datetime.now(UTC) - timedelta(minutes=16)
    assert _refusal(now=early)[2].startswith("Signature not yet current: ")
    _verify(signed_request(URL, "x", BODY, CREDS), now=datetime.now(UTC) + timedelta(minutes=14))


def test_the_scope_must_name_this_region() -> None:
    request = signed_request(URL, "SageMaker.DescribeTrainingJob", BODY, CREDS, region="eu-west-1")
    status, code, message = _refusal(request=request)
    assert (status, code) == (403, "InvalidSignatureException")
    assert "scoped to a valid region, not 'eu-west-1'" in message


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        (None, "MissingAuthenticationTokenException"),
        ("Bearer abc", "IncompleteSignatureException"),
        ("AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request", "IncompleteSignatureException"),
        (
            "AWS4-HMAC-SHA256 Credential=a/b, SignedHeaders=host, Signature=00",
            "IncompleteSignatureException",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request, SignedHeaders=x-amz-date, "
            "Signature=00",
            "IncompleteSignatureException",
        ),
    ],
)
def test_a_missing_or_cut_signature_is_refused(authorization: str | None, code: str) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    with pytest.raises(AwsError) as caught:
        parse_signature(headers)
    assert caught.value.code == code
    assert caught.value.status == (403 if authorization is None else 400)


@pytest.mark.parametrize(
    "authorization",
    ["sekrit-bearer-token", "Bearer sekrit-bearer-token", "AWS4-HMAC-SHA256 sekrit-bearer-token"],
)
def test_a_refusal_never_echoes_the_authorization_header(authorization: str) -> None:
    with pytest.raises(AwsError) as caught:
        parse_signature({"authorization": authorization})
    assert "sekrit" not in caught.value.message
