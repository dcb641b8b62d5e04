"""The served weed's gRPC certificates, made both ways (``_seaweed_security``): by the
``cryptography`` package and by the ``openssl`` command. Each way's files are a working mutual
TLS pair for ``127.0.0.1`` (checked with a real handshake on loopback: a client with the
certificate is let in, one without it is refused), the CA's key is thrown away and the server's
key is private. Which way runs where both exist, and that weed takes either, the served-S3 tests
show (tests/storage/test_seaweed_identities.py: weed's shell gets no answer without it)."""

from __future__ import annotations

import shutil
import socket
import ssl
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._support.system import require_extra
from trainops.storage._seaweed_security import make_grpc_tls, tls_by_cryptography, tls_by_openssl

Maker = Callable[[Path], bool]


def _maker(name: str) -> Maker:
    """The way ``name``: the cryptography package is the s3 extra's (missing: skipped here,
    failed in CI, which installs it); openssl is the machine's, where it has one."""
    if name == "cryptography":
        require_extra("s3", "cryptography")
        return tls_by_cryptography
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command here")
    return tls_by_openssl


MAKERS = ["cryptography", "openssl"]


def _made(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / "tls"
    folder.mkdir(mode=0o700)
    assert _maker(name)(folder)
    return folder


def _server(folder: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "weed.crt", folder / "weed.key")
    context.load_verify_locations(folder / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED  # weed's gRPC asks for the client's certificate
    return context


def _client(folder: Path, with_certificate: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(folder / "ca.crt")
    if with_certificate:
        context.load_cert_chain(folder / "weed.crt", folder / "weed.key")
    return context


def _handshake(folder: Path, with_certificate: bool) -> str:
    """What the server saw: ``ok`` or the error its handshake (and first read) ended with."""
    seen: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with _server(folder).wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
                    seen.append("ok")
            except (ssl.SSLError, OSError) as exc:
                seen.append(type(exc).__name__)

        thread = threading.Thread(target=serve)
        thread.start()
        with socket.create_connection(("127.0.0.1", port)) as raw:
            try:
                with _client(folder, with_certificate).wrap_socket(
                    raw, server_hostname="127.0.0.1"
                ) as tls:
                    tls.sendall(b"x")
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass
        thread.join(timeout=60)
    return seen[0]


@pytest.mark.parametrize("name", MAKERS)
def test_the_certificates_are_a_mutual_tls_pair_for_loopback(name: str, tmp_path: Path) -> None:
    folder = _made(name, tmp_path)
    assert _handshake(folder, with_certificate=True) == "ok"
    assert _handshake(folder, with_certificate=False) != "ok"


@pytest.mark.parametrize("name", MAKERS)
def test_the_ca_key_is_gone_and_the_server_key_is_private(name: str, tmp_path: Path) -> None:
    folder = _made(name, tmp_path)
    assert {"ca.crt", "weed.crt", "weed.key"} <= {p.name for p in folder.iterdir()}
    assert not (folder / "ca.key").exists()
    assert stat.S_IMODE((folder / "weed.key").stat().st_mode) & 0o077 == 0


def test_without_either_way_none_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_cryptography(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("cryptography"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_cryptography)
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    folder = tmp_path / "tls"
    folder.mkdir()
    assert make_grpc_tls(folder) is False
    assert list(folder.iterdir()) == []
