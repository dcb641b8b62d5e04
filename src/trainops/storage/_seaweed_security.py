"""The served weed's lock-down: ``security.toml``'s JWT keys, and a bucket made through S3.

weed's master, volume and filer HTTP ports check no S3 credentials. ``_seaweed`` turns the
master's and the filer's HTTP APIs off (``-disableHttp``), and with the keys below a volume
server serves or takes a file only with a JWT signed by ``jwt.signing`` (``.read`` for reads),
which weed's own filer and S3 gateway mint (the filer keys guard the filer should its HTTP come
back). The keys are random, made at each launch of weed, written to the 0600 file only and never
logged. With the filer's HTTP off, the default bucket is made by a SigV4-signed S3 CreateBucket.
docs/storage.md ("Limits") says what stays open: weed's gRPC ports.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

__all__ = ["SECURITY_FILE", "WeedKeys", "signed_create_bucket"]

SECURITY_FILE = "security.toml"
_TTL_SECONDS = 60


def _key() -> str:
    return secrets.token_hex(32)


@dataclass(frozen=True)
class WeedKeys:
    """The four HS256 keys of one weed launch (their values never appear in a repr)."""

    volume_write: str = field(repr=False)
    volume_read: str = field(repr=False)
    filer_write: str = field(repr=False)
    filer_read: str = field(repr=False)

    @classmethod
    def generate(cls) -> WeedKeys:
        return cls(_key(), _key(), _key(), _key())

    def toml(self) -> str:
        """The text of ``security.toml`` (the keys are hex: no quoting needed)."""
        return (
            "# Written by trainops at each start of its S3 server; do not edit.\n"
            f'[jwt.signing]\nkey = "{self.volume_write}"\nexpires_after_seconds = {_TTL_SECONDS}\n'
            f'[jwt.signing.read]\nkey = "{self.volume_read}"\n'
            f"expires_after_seconds = {_TTL_SECONDS}\n"
            f'[jwt.filer_signing]\nkey = "{self.filer_write}"\n'
            f"expires_after_seconds = {_TTL_SECONDS}\n"
            f'[jwt.filer_signing.read]\nkey = "{self.filer_read}"\n'
            f"expires_after_seconds = {_TTL_SECONDS}\n"
        )


def signed_create_bucket(
    endpoint_url: str, bucket: str, region: str, key_id: str, secret: str
) -> urllib.request.Request:
    """An S3 CreateBucket request for ``bucket`` (a checked name) signed with SigV4 by the key
    ``key_id``: the way to make a bucket while weed's filer has no HTTP API."""
    now = time.gmtime()
    stamp, day = time.strftime("%Y%m%dT%H%M%SZ", now), time.strftime("%Y%m%d", now)
    host = urllib.parse.urlsplit(endpoint_url).netloc
    empty = hashlib.sha256(b"").hexdigest()
    headers = {"host": host, "x-amz-content-sha256": empty, "x-amz-date": stamp}
    names = ";".join(headers)
    canonical = "\n".join(
        ["PUT", f"/{bucket}", "", *(f"{k}:{v}" for k, v in headers.items()), "", names, empty]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    return urllib.request.Request(  # noqa: S310 (the server's own loopback http URL)
        f"{endpoint_url}/{bucket}",
        method="PUT",
        headers={**headers, "Authorization": authorization},
    )
