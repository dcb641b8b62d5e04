"""Verifying AWS Signature Version 4 (the ``Authorization: AWS4-HMAC-SHA256 ...`` header), as
botocore's ``SigV4Auth`` signs (botocore/auth.py is the reference).

Two steps, so that a request with a wrong credential costs no body: :func:`parse_signature`
and :meth:`Verifier.check_credential` look only at the headers (the key id, the scope's date,
region and service, the 15-minute skew window, a session token); :meth:`Verifier.verify` then
recomputes the signature over the method, path, query, signed headers (``host`` among them) and
the body's SHA-256, and compares in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, unquote

from trainops.server.aws._credentials import AwsCredentials
from trainops.server.aws._errors import AwsError

__all__ = ["SKEW", "SignedRequest", "Verifier", "parse_signature"]

ALGORITHM = "AWS4-HMAC-SHA256"
SKEW = timedelta(minutes=15)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_FIELD = re.compile(r"\s*(Credential|SignedHeaders|Signature)=([^,\s]*)\s*")
_BAD_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
)
_BAD_TOKEN = "The security token included in the request is invalid."  # noqa: S105 (words)


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """What the Authorization header says: the key id, the scope, the headers signed."""

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


def parse_signature(headers: Mapping[str, str]) -> SignedRequest:
    """The request's SigV4 signature; the service's refusal when there is none or it is cut."""
    header = headers.get("authorization")
    if header is None:
        raise AwsError(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        # The header is not echoed: it may be a secret meant for another API (a bearer token).
        raise _incomplete(f"Unsupported AWS 'algorithm': only {ALGORITHM} is accepted")
    fields = _fields(rest)
    missing = [
        name for name in ("Credential", "SignedHeaders", "Signature") if not fields.get(name)
    ]
    if missing:
        raise _incomplete(f"Authorization header requires '{missing[0]}' parameter.")
    scope = fields["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise _incomplete(
            f"Credential should have 5 slash-separated parts, not {len(scope)}: "
            "<key id>/<date>/<region>/<service>/aws4_request"
        )
    signed = tuple(fields["SignedHeaders"].split(";"))
    if "host" not in signed:
        raise _incomplete("Signature must include the 'host' header in SignedHeaders")
    key_id, date, region, service = scope[:4]
    return SignedRequest(key_id, date, region, service, signed, fields["Signature"])


def _fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in text.split(","):
        found = _FIELD.fullmatch(part)
        if found is not None:
            fields[found.group(1)] = found.group(2)
    return fields


def _incomplete(message: str) -> AwsError:
    return AwsError(400, "IncompleteSignatureException", message)


class Verifier:
    """Checks signatures made with ``credentials`` for ``region`` (None: no key is valid)."""

    def __init__(self, credentials: AwsCredentials | None, region: str) -> None:
        self.credentials = credentials
        self.region = region

    def check_credential(
        self, signed: SignedRequest, headers: Mapping[str, str], now: datetime
    ) -> None:
        """Refuse an unknown key, a session token, a wrong scope or a stale date (headers only)."""
        key = self.credentials
        known = key is not None and hmac.compare_digest(
            signed.access_key_id.encode(), key.access_key_id.encode()
        )
        if not known or "x-amz-security-token" in headers:
            raise AwsError(403, "UnrecognizedClientException", _BAD_TOKEN)
        stamp = headers.get("x-amz-date", "")
        when = _parse_date(stamp)
        if stamp[:8] != signed.date:
            raise _invalid(f"Credential should be scoped to a valid date, not '{signed.date}'.")
        if signed.region != self.region:
            raise _invalid(
                f"Credential should be scoped to a valid region, not '{signed.region[:40]}'. "
                f"This server's region is '{self.region}'."
            )
        _check_skew(stamp, when, now)

    def verify(
        self,
        signed: SignedRequest,
        request: tuple[str, str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> None:
        """Recompute the signature over ``request`` (method, raw path, raw query) and ``body``."""
        assert self.credentials is not None  # check_credential came first
        canonical = _canonical_request(signed, request, headers, body)
        to_sign = "\n".join(
            [ALGORITHM, headers["x-amz-date"], signed.scope, _sha256(canonical.encode())]
        )
        key = _signing_key(self.credentials.secret_access_key, signed)
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signed.signature.encode()):
            raise _invalid(_BAD_SIGNATURE)


def _invalid(message: str) -> AwsError:
    return AwsError(403, "InvalidSignatureException", message)


def _parse_date(stamp: str) -> datetime:
    try:
        return datetime.strptime(stamp, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError:
        raise _incomplete(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' "
            "header in the form YYYYMMDDTHHMMSSZ"
        ) from None


def _check_skew(stamp: str, when: datetime, now: datetime) -> None:
    fmt = now.strftime(_AMZ_DATE)
    if when < now - SKEW:
        earliest = (now - SKEW).strftime(_AMZ_DATE)
        raise _invalid(
            f"Signature expired: {stamp} is now earlier than {earliest} ({fmt} - 15 min.)"
        )
    if when > now + SKEW:
        latest = (now + SKEW).strftime(_AMZ_DATE)
        raise _invalid(
            f"Signature not yet current: {stamp} is still later than {latest} ({fmt} + 15 min.)"
        )


def _canonical_request(
    signed: SignedRequest, request: tuple[str, str, str], headers: Mapping[str, str], body: bytes
) -> str:
    method, path, query = request
    lines = []
    for name in signed.signed_headers:
        if name not in headers:
            raise _invalid(_BAD_SIGNATURE)
        lines.append(f"{name}:{' '.join(headers[name].split())}")
    payload = _sha256(body)  # a JSON service signs its body: no UNSIGNED-PAYLOAD
    if headers.get("x-amz-content-sha256", payload) != payload:
        raise _invalid(_BAD_SIGNATURE)
    return "\n".join(
        [
            method,
            quote(unquote(path), safe="/~") or "/",
            _canonical_query(query),
            "\n".join(lines) + "\n",
            ";".join(signed.signed_headers),
            payload,
        ]
    )


def _canonical_query(query: str) -> str:
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&") if query)
    return "&".join(f"{key}={value}" for key, value in pairs)


def _signing_key(secret: str, signed: SignedRequest) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (signed.date, signed.region, signed.service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
