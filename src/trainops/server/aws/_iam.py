"""The ``iam`` service: what the SageMaker SDK v3 (``sagemaker-train``'s ModelTrainer) asks IAM
before it creates a training job: SimulatePrincipalPolicy (may the role do what training
needs?) and GetRole (does the role trust ``sagemaker.amazonaws.com``?).

There is no IAM here: a role is not used to run a job (the job holds its own powers and no
more), so every role named exists in the account our ARNs name, trusts SageMaker, and may do
every action asked about on every resource asked about (no policy is named). Any other IAM
operation is refused as unknown.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from trainops._settings import Settings
from trainops.control import JobController
from trainops.server.aws._sagemaker import ACCOUNT_ID
from trainops.server.aws._services import AwsOperation, AwsService

__all__ = ["iam_service"]

_MAX_ITEMS = 100  # a simulation's actions and resources each answered at most this many
_CREATED = 0  # every role "was created" at the epoch: there is no role to date
#: The trust policy every role has: SageMaker (the service principal training assumes) may.
TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def iam_service(controller: JobController, settings: Settings) -> AwsService:
    """IAM as far as the SDKs need it (the controller and settings are not used)."""
    return AwsService.of(
        "iam",
        "iam",
        [
            AwsOperation("SimulatePrincipalPolicy", _simulate_principal_policy),
            AwsOperation("GetRole", _get_role),
        ],
    )


def _get_role(body: dict[str, Any]) -> dict[str, Any]:
    name = body["RoleName"]  # the model's pattern ([\\w+=,.@-]+) was checked before
    return {
        "Role": {
            "Path": "/",
            "RoleName": name,
            "RoleId": "AROA" + ACCOUNT_ID,
            "Arn": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}",
            "CreateDate": _CREATED,
            # IAM gives the document URL-encoded, as the SDKs expect it
            "AssumeRolePolicyDocument": quote(json.dumps(TRUST_POLICY, separators=(",", ":"))),
        }
    }


def _simulate_principal_policy(body: dict[str, Any]) -> dict[str, Any]:
    resources = list(body.get("ResourceArns") or ["*"])
    results = [
        {
            "EvalActionName": action,
            "EvalResourceName": resource,
            "EvalDecision": "allowed",
            "MatchedStatements": [],
            "MissingContextValues": [],
        }
        for action in body["ActionNames"][:_MAX_ITEMS]
        for resource in resources[:_MAX_ITEMS]
    ]
    return {"EvaluationResults": results, "IsTruncated": False}
