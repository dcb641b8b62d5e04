"""The credentials the server issues: derived from its token (never the token), written as the
``trainops`` profile (secret file mode 0600) that botocore reads to reach the server."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import botocore.session
import pytest

from tests.control._harness import ControlPlane, control_plane
from trainops._settings import Settings
from trainops.server._run import _aws_banner
from trainops.server.aws import PROFILE, derive_credentials, write_profile


def test_the_key_is_derived_from_the_token_and_is_not_the_token() -> None:
    creds = derive_credentials("t0ken")
    assert creds == derive_credentials("t0ken")
    assert creds != derive_credentials("t0ken2")
    assert creds.access_key_id.startswith("AKIA") and len(creds.access_key_id) == 20
    assert len(creds.secret_access_key) == 40
    assert "t0ken" not in creds.secret_access_key + creds.access_key_id
    assert creds.secret_access_key not in repr(creds)


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


@pytest.mark.slow
def test_the_printed_profile_reaches_the_server(
    plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _aws_banner(plane.server)
    assert plane.server.token is not None
    creds = derive_credentials(plane.server.token)
    assert creds.access_key_id in line
    assert creds.secret_access_key not in line and plane.server.token not in line
    directory = plane.server.settings.home / "aws"
    secret_file = directory / "credentials"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert plane.server.token not in secret_file.read_text()
    # As a user does with the line it printed: no endpoint or key in the code.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(secret_file))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(directory / "config"))
    monkeypatch.setenv("AWS_PROFILE", PROFILE)
    client = botocore.session.Session().create_client("sagemaker")
    assert client.list_training_jobs()["TrainingJobSummaries"] == []


def test_with_a_served_s3_the_profile_sends_s3_there_and_everything_else_to_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds = derive_credentials("a-token")
    write_profile(
        tmp_path,
        creds,
        region="eu-west-1",
        endpoint="http://127.0.0.1:8470",
        s3_endpoint="http://127.0.0.1:8333",
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("AWS_ENDPOINT_URL"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_PROFILE", PROFILE)
    session = botocore.session.Session()
    s3 = session.create_client("s3")
    assert s3.meta.endpoint_url == "http://127.0.0.1:8333"
    assert s3.meta.config.s3 == {"addressing_style": "path"}
    for service in ("sagemaker", "logs", "sts"):
        assert session.create_client(service).meta.endpoint_url == "http://127.0.0.1:8470"
    # One key signs both: the served S3 is given it (S3Server's extra_keys).
    assert session.get_credentials().access_key == creds.access_key_id


def test_the_served_s3_takes_the_profile_s_key_as_a_second_key_of_its_identity(
    tmp_path: Path,
) -> None:
    from trainops.storage._seaweed import S3Server

    server = S3Server(tmp_path, "a-token", extra_keys=(("AKIAEXAMPLE", "secret"),))
    identity = server._identities()
    keys = [c["accessKey"] for c in identity["credentials"]]
    assert keys == [server.access_key, "AKIAEXAMPLE"]
