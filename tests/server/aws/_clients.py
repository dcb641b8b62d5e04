"""Clients of the server's AWS wire layer for the tests: botocore's own SageMaker client (the
client boto3 hands out: ``boto3.client`` is botocore's ``create_client``) and raw requests
signed by botocore's own SigV4 signer."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import httpx
from botocore import UNSIGNED
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from trainops.server.aws import AwsCredentials

JSON_11 = "application/x-amz-json-1.1"


def sagemaker_client(
    url: str, creds: AwsCredentials, region: str = "us-east-1", *, signed: bool = True
) -> Any:
    config = Config(retries={"max_attempts": 1, "mode": "standard"})
    if not signed:
        config = config.merge(Config(signature_version=UNSIGNED))
    return botocore.session.Session().create_client(
        "sagemaker",
        region_name=region,
        endpoint_url=url,
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_access_key,
        config=config,
    )


def signed_request(
    url: str,
    target: str,
    body: bytes,
    creds: AwsCredentials,
    region: str = "us-east-1",
    service: str = "sagemaker",
) -> AWSRequest:
    """A POST signed as botocore signs it (headers and body, ready to send)."""
    request = AWSRequest(
        method="POST",
        url=url + "/",
        data=body,
        headers={"X-Amz-Target": target, "Content-Type": JSON_11},
    )
    keys = Credentials(creds.access_key_id, creds.secret_access_key)
    SigV4Auth(keys, service, region).add_auth(request)
    return request


def send(request: AWSRequest, body: bytes | None = None) -> httpx.Response:
    """Send ``request`` (with ``body`` in place of the signed one, to tamper with it)."""
    data = request.body if body is None else body
    headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
    return httpx.post(request.url, content=data, headers=headers, timeout=30)


def aws_error(response: httpx.Response) -> tuple[int, str, str]:
    """Status, ``__type`` and message of a JSON 1.1 error answer (its headers checked)."""
    assert response.headers["content-type"] == JSON_11
    assert response.headers["x-amzn-requestid"]
    body = json.loads(response.content)
    assert response.headers["x-amzn-errortype"].split(":")[0] == body["__type"]
    return response.status_code, body["__type"], body["message"]


def aws_client(
    service: str, url: str, creds: AwsCredentials, region: str = "us-east-1", **config: Any
) -> Any:
    """botocore's client of ``service`` (``logs``, ``sts``, ``cloudwatch``...) at ``url``."""
    settings = Config(retries={"max_attempts": 1, "mode": "standard"}, **config)
    return botocore.session.Session().create_client(
        service,
        region_name=region,
        endpoint_url=url,
        aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_access_key,
        config=settings,
    )


def signed_form(
    url: str, body: bytes, creds: AwsCredentials, region: str = "us-east-1", service: str = "sts"
) -> AWSRequest:
    """A query-protocol POST of ``body`` (a form) signed as botocore signs it."""
    headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    request = AWSRequest(method="POST", url=url + "/", data=body, headers=headers)
    keys = Credentials(creds.access_key_id, creds.secret_access_key)
    SigV4Auth(keys, service, region).add_auth(request)
    return request
