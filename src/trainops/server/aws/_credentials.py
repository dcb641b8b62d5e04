"""The AWS credentials the server issues: an access key id and a secret derived from the
server's token with HMAC under fixed labels (never the token itself), and the profile files the
AWS SDKs read (``$TRAINOPS_HOME/aws/credentials`` and ``.../aws/config``, profile ``trainops``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from trainops._home import write_private

__all__ = ["PROFILE", "SDK_CONFIG", "AwsCredentials", "derive_credentials", "write_profile"]

PROFILE = "trainops"
# The SageMaker Python SDK's defaults file (its SAGEMAKER_USER_CONFIG_OVERRIDE): no telemetry
# calls to AWS, and the served S3's bucket as the default bucket.
SDK_CONFIG = "sagemaker.yaml"
_KEY_ID_LABEL = b"trainops aws access key id v1"
_SECRET_LABEL = b"trainops aws secret access key v1"


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    """One access key: its id (shown freely) and its secret (written only to a 0600 file)."""

    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:  # the secret stays out of logs and tracebacks
        return f"AwsCredentials(access_key_id={self.access_key_id!r})"


def derive_credentials(token: str) -> AwsCredentials:
    """The access key of a server whose API token is ``token``."""
    key = token.encode()
    key_id = hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).digest()
    secret = hmac.new(key, _SECRET_LABEL, hashlib.sha256).digest()
    return AwsCredentials(
        access_key_id="AKIA" + base64.b32encode(key_id).decode()[:16],
        secret_access_key=base64.b64encode(secret).decode()[:40],
    )


def write_profile(
    directory: Path,
    creds: AwsCredentials,
    *,
    region: str,
    endpoint: str,
    s3_endpoint: str | None = None,
    bucket: str | None = None,
) -> Path:
    """Write the ``trainops`` profile (credentials, mode 0600; config with the region and the
    endpoint URL) under ``directory``; returns the credentials file's path. With
    ``s3_endpoint`` (the served S3, which takes the same key), S3 requests go there instead:
    a ``services`` section, as the AWS SDKs read service-specific endpoints. Beside them, the
    SageMaker Python SDK's defaults (:data:`SDK_CONFIG`), with ``bucket`` as its default."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    credentials = directory / "credentials"
    write_private(
        credentials,
        f"[{PROFILE}]\naws_access_key_id = {creds.access_key_id}\n"
        f"aws_secret_access_key = {creds.secret_access_key}\n",
    )
    config = f"[profile {PROFILE}]\nregion = {region}\nendpoint_url = {endpoint}\n"
    if s3_endpoint:
        config += (
            f"services = {PROFILE}\ns3 =\n  addressing_style = path\n\n"
            f"[services {PROFILE}]\ns3 =\n  endpoint_url = {s3_endpoint}\n"
        )
    write_private(directory / "config", config)
    session = f"      Session:\n        DefaultS3Bucket: {bucket}\n" if bucket else ""
    write_private(
        directory / SDK_CONFIG,
        f"SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n"
        f"      TelemetryOptOut: true\n{session}",
    )
    return credentials
