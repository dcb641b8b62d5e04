"""The ``sts`` service: GetCallerIdentity, so that the SDKs' account look-ups (the SageMaker
SDK's default bucket, ``sagemaker-<region>-<account>``) name the account our ARNs name.

There is one identity: the server's own credentials (``derive_credentials``), the account's
root; its ARN and ids are fixed, so a client sees the same answer on every server.
"""

from __future__ import annotations

from typing import Any

from trainops._settings import Settings
from trainops.control import JobController
from trainops.server.aws._sagemaker import ACCOUNT_ID
from trainops.server.aws._services import AwsOperation, AwsService

__all__ = ["CALLER_ARN", "sts_service"]

CALLER_ARN = f"arn:aws:iam::{ACCOUNT_ID}:root"


def sts_service(controller: JobController, settings: Settings) -> AwsService:
    """STS as far as the SDKs need it (the controller and settings are not used)."""
    return AwsService.of("sts", "sts", [AwsOperation("GetCallerIdentity", _caller_identity)])


def _caller_identity(body: dict[str, Any]) -> dict[str, Any]:
    return {"UserId": ACCOUNT_ID, "Account": ACCOUNT_ID, "Arn": CALLER_ARN}
