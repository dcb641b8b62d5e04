"""The client's study methods against a real control plane: a study put is listed and described
as put, an unknown one is a JobNotFoundError, a bad one a clear error naming the field."""

from __future__ import annotations

import pytest

from tests.control._harness import control_plane
from trainops import JobNotFoundError, TrainopsError
from trainops._settings import Settings
from trainops.client import Client


def test_a_study_is_put_listed_and_described(settings: Settings) -> None:
    row = {"label": "1 x ml.m5.large, 1/host", "instance_type": "ml.m5.large",
           "instance_count": 1, "processes_per_host": 1, "job_name": "j-1", "status": "Completed",
           "throughput": 12.5, "efficiency": 1.0}  # fmt: skip
    study = {"name": "s-1", "title": "train.py: scaling study", "status": "Completed",
             "rows": [row]}  # fmt: skip
    with control_plane(settings) as plane, Client(plane.server.url, plane.server.token) as client:
        put = client.put_study(study)
        assert put["rows"][0]["throughput"] == 12.5 and put["target_metric"] is None
        assert [s["name"] for s in client.list_studies()] == ["s-1"]
        assert client.describe_study("s-1") == put
        with pytest.raises(JobNotFoundError, match="no study named 'nope'"):
            client.describe_study("nope")
        with pytest.raises(TrainopsError, match="name"):
            client.put_study({**study, "name": "../x"})
