"""The ``iam`` service: SimulatePrincipalPolicy, which the SageMaker SDK v3's ModelTrainer calls
to check that the job's role may do what training needs before it creates the job.

There is no IAM here: a role is not used to run a job (the job holds its own powers and no
more), so every action asked about is answered ``allowed`` for every resource asked about, and
the simulation names no policy. Any other IAM operation is refused as unknown.
"""

from __future__ import annotations

from typing import Any

from trainops._settings import Settings
from trainops.control import JobController
from trainops.server.aws._services import AwsOperation, AwsService

__all__ = ["iam_service"]

_MAX_ITEMS = 100  # a simulation's actions and resources each answered at most this many


def iam_service(controller: JobController, settings: Settings) -> AwsService:
    """IAM as far as the SDKs need it (the controller and settings are not used)."""
    return AwsService.of(
        "iam", "iam", [AwsOperation("SimulatePrincipalPolicy", _simulate_principal_policy)]
    )


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
