"""The real SageMaker Python SDK v2 reading a job through the server: ``Session.logs_for_job``
follows a running two-host job's log to its end (CloudWatch Logs), ``TrainingJobAnalytics``
reads its metrics (CloudWatch metrics) and STS names the account. Skipped where the SDK is not
installed (it comes with the test extra)."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.control._harness import ControlPlane, control_plane
from trainops._settings import Settings
from trainops.server.aws import ACCOUNT_ID, derive_credentials

pytestmark = pytest.mark.slow


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


@pytest.fixture
def sdk(plane: ControlPlane, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The SDK's module, its clients all pointed at the server (one endpoint for every service)."""
    assert plane.server.token is not None
    creds = derive_credentials(plane.server.token)
    for name, value in {
        "AWS_ENDPOINT_URL": plane.server.url,
        "AWS_ACCESS_KEY_ID": creds.access_key_id,
        "AWS_SECRET_ACCESS_KEY": creds.secret_access_key,
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    return pytest.importorskip("sagemaker")


def test_the_sdk_follows_a_running_job_and_reads_its_metrics(plane: ControlPlane, sdk: Any) -> None:
    import boto3
    from sagemaker.analytics import TrainingJobAnalytics

    boto = boto3.Session()
    starts: set[int] = set()  # the startTime of each GetLogEvents the SDK sends

    def seen(params: dict[str, Any], **_: Any) -> None:
        starts.add(params.get("startTime", 0))

    boto.events.register("provide-client-params.cloudwatch-logs.GetLogEvents", seen)
    # a bucket of its own: the SDK's default bucket asks STS at an endpoint it sets itself
    session = sdk.Session(boto_session=boto, default_bucket="unused-bucket")
    # 9 s of lines: the SDK sleeps 5 s before its first look, so it follows the rest live
    plane.submit("sdk-live", {"FAKE_LINES": "30", "FAKE_LINE_DELAY": "0.3"}, instance_count=2)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        session.logs_for_job("sdk-live", wait=True, poll=1)
    # the SDK prints the statuses without a line's end, so a log line may follow one at once
    said = re.findall(r"(algo-\d) line (\d+)", printed.getvalue())
    for host in ("algo-1", "algo-2"):
        assert [int(i) for h, i in said if h == host] == list(range(30))
    assert len(starts - {0}) >= 2  # it read on from where it was, more than once
    frame = TrainingJobAnalytics(
        "sdk-live", metric_names=["loss", "step"], sagemaker_session=session
    ).dataframe()
    assert set(frame["metric_name"]) == {"loss", "step"}
    assert boto3.client("sts").get_caller_identity()["Account"] == ACCOUNT_ID
