"""CloudWatch metrics on the server's port, driven by botocore's own ``cloudwatch`` client (it
speaks JSON 1.0 to the service): a job's metric series as the SageMaker SDK's
TrainingJobAnalytics reads it, its statistics per period, ListMetrics, and the refusals."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.control._harness import ControlPlane, control_plane
from tests.server.aws._clients import aws_client
from trainops._settings import Settings
from trainops.server.aws import derive_credentials

pytestmark = pytest.mark.slow

NAMESPACE = "/aws/sagemaker/TrainingJobs"


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


def _cloudwatch(plane: ControlPlane) -> Any:
    assert plane.server.token is not None
    return aws_client("cloudwatch", plane.server.url, derive_credentials(plane.server.token))


def test_a_jobs_metrics_as_training_job_analytics_reads_them(plane: ControlPlane) -> None:
    plane.submit("measured", {"FAKE_LINES": "6"})
    plane.wait_ended("measured")
    cloudwatch = _cloudwatch(plane)
    now = datetime.now(UTC)
    window = {"StartTime": now - timedelta(hours=1), "EndTime": now + timedelta(minutes=1)}
    dimensions = [{"Name": "TrainingJobName", "Value": "measured"}]
    answer = cloudwatch.get_metric_statistics(
        Namespace=NAMESPACE, MetricName="loss", Dimensions=dimensions, Period=60,
        Statistics=["Average", "SampleCount", "Minimum", "Maximum"], **window,
    )  # fmt: skip
    points = answer["Datapoints"]
    assert answer["Label"] == "loss"
    assert sum(p["SampleCount"] for p in points) == 6
    assert min(p["Minimum"] for p in points) == pytest.approx(1 / 6)
    assert max(p["Maximum"] for p in points) == 1.0
    assert all(isinstance(p["Timestamp"], datetime) for p in points)
    one = cloudwatch.get_metric_statistics(
        Namespace=NAMESPACE, MetricName="step", Dimensions=dimensions, Period=7200,
        ExtendedStatistics=["p50", "p100"], **window,
    )  # fmt: skip
    (point,) = one["Datapoints"]
    assert point["ExtendedStatistics"] == {"p50": 2.0, "p100": 5.0}
    elsewhere = cloudwatch.get_metric_statistics(
        Namespace="AWS/EC2", MetricName="loss", Dimensions=dimensions, Period=60,
        Statistics=["Average"], **window,
    )  # fmt: skip
    assert elsewhere["Datapoints"] == []
    listed = cloudwatch.list_metrics(Namespace=NAMESPACE, Dimensions=dimensions)["Metrics"]
    assert [m["MetricName"] for m in listed] == ["loss", "step"]
    assert listed[0]["Dimensions"] == dimensions
    everything = cloudwatch.get_paginator("list_metrics").paginate(Namespace=NAMESPACE)
    assert {m["MetricName"] for page in everything for m in page["Metrics"]} == {"loss", "step"}


def test_the_services_refusals(plane: ControlPlane) -> None:
    cloudwatch = _cloudwatch(plane)
    now = datetime.now(UTC)
    base = {"Namespace": NAMESPACE, "MetricName": "loss", "Period": 60, "EndTime": now}
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"StartTime": now - timedelta(hours=1)},
         "InvalidParameterCombinationException", "Must specify either Statistics or"),
        ({"StartTime": now - timedelta(days=2), "Statistics": ["Sum"]},
         "InvalidParameterCombinationException", "exceeds the limit of 1440"),
        ({"StartTime": now, "Statistics": ["Sum"]},
         "InvalidParameterValueException", "StartTime must be less than"),
        ({"StartTime": now - timedelta(hours=1), "ExtendedStatistics": ["p101"]},
         "InvalidParameterValueException", "for parameter ExtendedStatistics is not valid"),
        ({"StartTime": now - timedelta(hours=1), "Statistics": ["Median"]},
         "ValidationException", "Member must satisfy enum value set"),
    ]  # fmt: skip
    for keys, code, words in cases:
        with pytest.raises(ClientError) as caught:
            cloudwatch.get_metric_statistics(**base, **keys)
        error = caught.value.response["Error"]
        assert error["Code"] == code and words in error["Message"], (keys, error)
