"""The AWS wire layer of the control plane: AWS's own protocols on the server's port.

Requests with AWS's shapes (an ``X-Amz-Target`` header or a SigV4 signature) are routed by their
signature's service name to a registered :class:`AwsService`, verified against the credentials the
server issues (:func:`derive_credentials`), validated by the botocore service model and answered in
the service's shapes and words. docs/sagemaker-api.md is the user's page, docs/internals/
aws-services.md says how to add a service or an operation.
"""

from trainops.server.aws._credentials import (
    PROFILE,
    SDK_CONFIG,
    AwsCredentials,
    derive_credentials,
    write_profile,
)
from trainops.server.aws._errors import AwsError
from trainops.server.aws._sagemaker import ACCOUNT_ID, sagemaker_service, training_job_arn
from trainops.server.aws._services import (
    AWS_SERVICES,
    AwsOperation,
    AwsService,
    ServiceFactory,
    service_model,
)
from trainops.server.aws._sigv4 import SKEW, Verifier
from trainops.server.aws._validation import validate
from trainops.server.aws._wire import MAX_AWS_BODY, AwsWire, is_aws_request

AWS_SERVICES.register_lazy("sagemaker", "trainops.server.aws._sagemaker:sagemaker_service")
AWS_SERVICES.register_lazy("sts", "trainops.server.aws._sts:sts_service")
AWS_SERVICES.register_lazy("iam", "trainops.server.aws._iam:iam_service")
AWS_SERVICES.register_lazy("logs", "trainops.server.aws._logs:logs_service")
AWS_SERVICES.register_lazy("monitoring", "trainops.server.aws._metrics:metrics_service")

__all__ = [
    "ACCOUNT_ID",
    "AWS_SERVICES",
    "MAX_AWS_BODY",
    "PROFILE",
    "SDK_CONFIG",
    "SKEW",
    "AwsCredentials",
    "AwsError",
    "AwsOperation",
    "AwsService",
    "AwsWire",
    "ServiceFactory",
    "Verifier",
    "derive_credentials",
    "is_aws_request",
    "sagemaker_service",
    "service_model",
    "training_job_arn",
    "validate",
    "write_profile",
]
