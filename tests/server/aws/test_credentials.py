"""The credentials the server issues: derived from its token (never the token), written as the
``trainops`` profile (secret file mode 0600) that botocore reads to reach the server."""

from __future__ import annotations

import stat
from collections.abc import Iterator

import botocore.session
import pytest

from tests.control._harness import ControlPlane, control_plane
from trainops._settings import Settings
from trainops.server._run import _aws_banner
from trainops.server.aws import PROFILE, derive_credentials


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
