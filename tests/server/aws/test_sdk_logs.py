"""The real SageMaker Python SDK v2 reading a job through the server: ``Session.logs_for_job``
follows a running two-host job's log (CloudWatch Logs), ``TrainingJobAnalytics`` reads its metrics
(CloudWatch metrics) and STS names the account. Skipped where the SDK is not installed (it comes
with the test extra).

The SDK asks DescribeTrainingJob only every 30 s while it follows a log, so a follow left to end
on its own lasts 35 s whatever the job does. What this test proves is in the log reads (every
line of both hosts exactly once, in order, read on from where the SDK was), so it ends the
follow from the SDK's own GetLogEvents hook once each stream has been read again after the last
line was printed; the job's end is then seen through the SDK's DescribeTrainingJob.
"""

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


LINES = 30
HOSTS = ("algo-1", "algo-2")


class _Enough(Exception):
    """Raised from the SDK's GetLogEvents hook: the follow has shown what the test proves."""


class _Follow:
    """What the SDK read and printed, watched from its GetLogEvents hook (called before each
    request, in the SDK's own thread): the ``startTime`` of each read, and once every line has
    been printed, the fresh reads (no ``nextToken``: a stream's first page in a round) of each
    stream since. The follow has shown everything once each stream had two: the first one's
    round (begun after the last line was printed) has printed all it got when the next begins,
    so a line read twice would be in the output by then."""

    def __init__(self, printed: io.StringIO) -> None:
        self.printed = printed
        self.starts: set[int] = set()
        self.fresh_after_all: dict[str, int] | None = None

    def lines(self) -> list[tuple[str, int]]:
        # the SDK prints the statuses without a line's end, so a log line may follow one at once
        said = re.findall(r"(algo-\d) line (\d+)", self.printed.getvalue())
        return [(host, int(i)) for host, i in said]

    def hook(self, params: dict[str, Any], **_: Any) -> None:
        self.starts.add(params.get("startTime", 0))
        if self.fresh_after_all is None:
            if len(self.lines()) < LINES * len(HOSTS):
                return
            self.fresh_after_all = {}
        if "nextToken" not in params:
            stream = str(params["logStreamName"])
            self.fresh_after_all[stream] = self.fresh_after_all.get(stream, 0) + 1
            counts = self.fresh_after_all.values()
            if len(self.fresh_after_all) == len(HOSTS) and min(counts) >= 2:
                raise _Enough


def test_the_sdk_follows_a_running_job_and_reads_its_metrics(plane: ControlPlane, sdk: Any) -> None:
    import boto3
    from sagemaker.analytics import TrainingJobAnalytics

    boto = boto3.Session()
    printed = io.StringIO()
    follow = _Follow(printed)
    boto.events.register("provide-client-params.cloudwatch-logs.GetLogEvents", follow.hook)
    # a bucket of its own: the SDK's default bucket asks STS at an endpoint it sets itself
    session = sdk.Session(boto_session=boto, default_bucket="unused-bucket")
    # 7.5 s of lines: the SDK sleeps 5 s before its first look, so it follows the rest live
    env = {"FAKE_LINES": str(LINES), "FAKE_LINE_DELAY": "0.25"}
    plane.submit("sdk-live", env, instance_count=len(HOSTS))
    with contextlib.redirect_stdout(printed), contextlib.suppress(_Enough):
        session.logs_for_job("sdk-live", wait=True, poll=1)
    said = follow.lines()
    for host in HOSTS:
        assert [i for h, i in said if h == host] == list(range(LINES))
    assert len(follow.starts - {0}) >= 2  # it read on from where it was, more than once
    plane.wait_ended("sdk-live")
    assert session.describe_training_job("sdk-live")["TrainingJobStatus"] == "Completed"
    frame = TrainingJobAnalytics(
        "sdk-live", metric_names=["loss", "step"], sagemaker_session=session
    ).dataframe()
    assert set(frame["metric_name"]) == {"loss", "step"}
    assert boto3.client("sts").get_caller_identity()["Account"] == ACCOUNT_ID
