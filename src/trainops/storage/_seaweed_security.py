"""The served weed's lock-down: ``security.toml``'s JWT keys and gRPC TLS, and a bucket made
through S3.

weed's master, volume and filer HTTP ports check no S3 credentials. ``_seaweed`` turns the
master's and the filer's HTTP APIs off (``-disableHttp``), and with the keys below a volume
server serves or takes a file only with a JWT signed by ``jwt.signing`` (``.read`` for reads),
which weed's own filer and S3 gateway mint (the filer keys guard the filer should its HTTP come
back). The keys are random, made at each launch of weed, written to the 0600 file only and never
logged. weed's gRPC ports take mutual TLS with a certificate of a CA made at each launch: by the
``cryptography`` package (the ``s3`` extra installs it), else by the ``openssl`` command; without
either they stay open. With the filer's HTTP off, the default bucket is made by a SigV4-signed S3
CreateBucket. docs/storage.md ("Limits") says what stays open.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "SECURITY_FILE",
    "WeedKeys",
    "make_grpc_tls",
    "signed_create_bucket",
    "tls_by_cryptography",
    "tls_by_openssl",
]

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

    def toml(self, tls: Path | None = None) -> str:
        """The text of ``security.toml`` (the keys are hex: no quoting needed); with ``tls`` (a
        folder :func:`make_grpc_tls` filled), every gRPC port takes only its certificate."""
        return _jwt_toml(self) + ("" if tls is None else _grpc_toml(tls))


def _grpc_toml(tls: Path) -> str:
    ca, cert, key = (json.dumps(str(tls / name)) for name in ("ca.crt", "weed.crt", "weed.key"))
    roles = "".join(
        f"[grpc.{role}]\ncert = {cert}\nkey = {key}\n"
        for role in ("master", "volume", "filer", "s3", "client")
    )
    return f"[grpc]\nca = {ca}\n{roles}"


def make_grpc_tls(folder: Path) -> bool:
    """A CA and one certificate it signed for weed's gRPC ports, new in ``folder`` (private):
    ``ca.crt``, ``weed.crt`` and ``weed.key``, the CA's own key thrown away (nothing more is
    signed: no one can mint another certificate). Made by the ``cryptography`` package where it
    is importable, else by the ``openssl`` command; False where there is neither."""
    return tls_by_cryptography(folder) or tls_by_openssl(folder)


def tls_by_cryptography(folder: Path) -> bool:
    """:func:`make_grpc_tls` by the ``cryptography`` package: False where it is not installed.
    The certificates are those ``openssl`` makes below (P-256 keys, SHA-256, ten years, the
    server's name ``127.0.0.1`` and ``localhost``), and the keys never touch a file but
    ``weed.key`` (0600)."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ec
    except ImportError:
        return False
    from cryptography.hazmat.primitives import serialization

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("trainops CA", ca_key.public_key(), ca_key, ca=True)
    weed = _certificate("weed", key.public_key(), ca_key, ca=False)
    pem = serialization.Encoding.PEM
    _write_private(
        folder / "weed.key",
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    (folder / "weed.crt").write_bytes(weed.public_bytes(pem))
    (folder / "ca.crt").write_bytes(ca.public_bytes(pem))
    return True


def _certificate(name: str, public_key: Any, ca_key: Any, *, ca: bool) -> Any:
    """A certificate of ``name`` for ``public_key``, signed by ``ca_key`` (the CA's, named
    ``trainops CA``): the CA's own with ``ca``, else the server's with its names."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trainops CA")]))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
    )
    if not ca:
        names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def tls_by_openssl(folder: Path) -> bool:
    """:func:`make_grpc_tls` by the ``openssl`` command with fixed arguments: False where there
    is no openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return False
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ca = ["-keyout", "ca.key", "-out", "ca.crt", "-days", "3650", "-subj", "/CN=trainops CA"]
    sign = ["-in", "weed.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"]
    steps = [
        ["req", "-x509", *curve, *ca],
        ["req", *curve, "-keyout", "weed.key", "-out", "weed.csr", "-subj", "/CN=weed"],
        ["x509", "-req", *sign, "-out", "weed.crt", "-days", "3650", "-extfile", "san.ext"],
    ]
    for step in steps:
        subprocess.run([openssl, *step], cwd=folder, check=True, capture_output=True, timeout=60)
    (folder / "ca.key").unlink()  # nothing more is signed: no one can mint another certificate
    return True


def _jwt_toml(keys: WeedKeys) -> str:
    return (
        "# Written by trainops at each start of its S3 server; do not edit.\n"
        f'[jwt.signing]\nkey = "{keys.volume_write}"\nexpires_after_seconds = {_TTL_SECONDS}\n'
        f'[jwt.signing.read]\nkey = "{keys.volume_read}"\n'
        f"expires_after_seconds = {_TTL_SECONDS}\n"
        f'[jwt.filer_signing]\nkey = "{keys.filer_write}"\n'
        f"expires_after_seconds = {_TTL_SECONDS}\n"
        f'[jwt.filer_signing.read]\nkey = "{keys.filer_read}"\n'
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
