"""The AWS wire layer's public names, and botocore loaded only when an AWS request comes."""

from __future__ import annotations

import subprocess
import sys

import trainops.server.aws as aws

EXPECTED = {
    "ACCOUNT_ID",
    "AWS_SERVICES",
    "MAX_AWS_BODY",
    "PROFILE",
    "SKEW",
    "ServiceFactory",
    "AwsCredentials",
    "AwsError",
    "AwsOperation",
    "AwsService",
    "AwsWire",
    "Verifier",
    "derive_credentials",
    "is_aws_request",
    "sagemaker_service",
    "service_model",
    "training_job_arn",
    "validate",
    "write_profile",
    "SDK_CONFIG",
}


def test_exported_members() -> None:
    assert set(aws.__all__) == EXPECTED
    for name in aws.__all__:
        assert getattr(aws, name) is not None, name


def test_the_app_does_not_load_botocore_until_an_aws_request() -> None:
    code = "import sys, trainops.server._app; print('botocore' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
