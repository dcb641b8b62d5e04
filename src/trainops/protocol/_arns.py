"""The ARNs that name a job, shared by the API that answers with them and the agent that hands
one to the script (``TRAINING_JOB_ARN``), so that both name a job alike.

Every ARN names one account, the server's (``000000000000``), and the server's region; the
resource part is lower-cased, as SageMaker's ARNs are.
"""

from __future__ import annotations

__all__ = ["ACCOUNT_ID", "processing_job_arn", "training_job_arn", "tuning_job_arn"]

#: The account every ARN names (there is one account: the server's).
ACCOUNT_ID = "000000000000"


def training_job_arn(region: str, name: str) -> str:
    """``arn:aws:sagemaker:<region>:000000000000:training-job/<name, lower-cased>``."""
    return f"arn:aws:sagemaker:{region}:{ACCOUNT_ID}:training-job/{name.lower()}"


def tuning_job_arn(region: str, name: str) -> str:
    """The tuning job's ARN, as :func:`training_job_arn` words a training job's."""
    return f"arn:aws:sagemaker:{region}:{ACCOUNT_ID}:hyper-parameter-tuning-job/{name.lower()}"


def processing_job_arn(region: str, name: str) -> str:
    """A processing job's ARN, as :func:`training_job_arn` words a training job's (the name a
    debugger rule's evaluation goes by; trainops evaluates rules in its control plane, so no
    processing job of that name exists)."""
    return f"arn:aws:sagemaker:{region}:{ACCOUNT_ID}:processing-job/{name.lower()}"
