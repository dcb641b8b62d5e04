"""The api_requests table (schema version 17): a resource's kept request survives reopening the
database, the first one kept stays, kinds are apart, and a resource without one has none."""

from __future__ import annotations

from pathlib import Path

from trainops.store import MetadataStore


def test_a_kept_request_survives_reopening_and_the_first_stays(tmp_path: Path) -> None:
    path = tmp_path / "trainops.db"
    sent = {"RoleArn": "arn:aws:iam::1:role/R", "HyperParameters": {"lr": '"0.1"', "x'; --": "1"}}
    store = MetadataStore(path)
    store.put_api_request("training-job", "job-1", sent)
    store.put_api_request("training-job", "job-1", {"RoleArn": "arn:aws:iam::1:role/Other"})
    store.close()
    reopened = MetadataStore(path)
    try:
        assert reopened.api_request("training-job", "job-1") == sent
        assert reopened.api_request("hyper-parameter-tuning-job", "job-1") == {}
        assert reopened.api_request("training-job", "JOB-1") == {}
        assert reopened.api_request("training-job", "nowhere") == {}
    finally:
        reopened.close()
