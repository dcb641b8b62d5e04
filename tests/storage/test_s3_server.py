"""The S3 server ``trainops server --s3`` supervises (SeaweedFS): private keys, loopback only,
restarted when it dies, a start that fails says why; and the settings that turn it on."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require
from tests.e2e._harness import wait_for
from trainops import ConfigError
from trainops._settings import Settings
from trainops.storage._seaweed import (
    CLIENT_FILE,
    S3Server,
    S3ServerError,
    read_client_file,
    sync_tree,
)

TOKEN = "a-home-token-for-the-tests"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One served S3 for the module's tests that need it running (the one that kills weed
    checks that it comes back, so it leaves the server as it found it)."""
    require("weed")
    server = S3Server(tmp_path_factory.mktemp("served") / "home", TOKEN)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _client(server: S3Server, *, secret: str | None = None) -> Any:
    import botocore.session  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    s3 = server.settings
    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=s3.endpoint_url,
        region_name=s3.region,
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=secret or s3.secret_access_key,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _outward_address() -> str | None:
    """This machine's address on its default route (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


@pytest.mark.slow
@pytest.mark.s3
def test_the_served_s3_keeps_its_keys_private_and_stays_on_loopback(served: S3Server) -> None:
    s3 = served.settings
    assert s3.secret_access_key is not None and TOKEN not in s3.secret_access_key
    for name in ("identities.json", "client.json", "port"):
        mode = stat.S_IMODE((served.root / name).stat().st_mode)
        assert mode == 0o600, f"{name} is mode {mode:o}"
    assert stat.S_IMODE(served.root.stat().st_mode) == 0o700
    assert read_client_file(served.home) == s3
    # The default bucket exists and takes writes; a wrong secret is refused.
    _client(served).put_object(Bucket="trainops", Key="k", Body=b"v")
    with pytest.raises(Exception, match=r"SignatureDoesNotMatch|AccessDenied|InvalidAccessKey"):
        _client(served, secret="not-the-secret").get_object(Bucket="trainops", Key="k")
    assert s3.secret_access_key not in served.log_path.read_text(errors="replace")
    outward = _outward_address()
    if outward is not None:  # the port is not reachable on this machine's own address
        port = int(s3.endpoint_url.rsplit(":", 1)[1])
        with pytest.raises(OSError), socket.create_connection((outward, port), timeout=5):
            pass


@pytest.mark.slow
@pytest.mark.s3
def test_a_killed_s3_server_is_restarted_on_the_same_port_with_its_data(
    served: S3Server,
) -> None:
    _client(served).put_object(Bucket="trainops", Key="kept", Body=b"still here")
    first, restarts = served.pid, served.restarts
    assert first is not None
    os.killpg(first, signal.SIGKILL)
    wait_for(lambda: served.pid != first and served.restarts == restarts + 1, timeout=60)

    def answers() -> bytes | None:
        with contextlib.suppress(Exception):
            body: bytes = _client(served).get_object(Bucket="trainops", Key="kept")["Body"].read()
            return body
        return None

    assert wait_for(answers, timeout=60) == b"still here"


@pytest.mark.slow
@pytest.mark.s3
def test_a_stopped_s3_server_is_gone_and_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    """stop() kills weed at once (its own graceful stop takes 15 s and does not finish sooner)
    and then syncs its files: writes acknowledged just before the stop are there after a start."""
    require("weed")
    home = tmp_path / "home"
    server = S3Server(home, TOKEN)
    server.start()
    try:
        client = _client(server)
        for index in range(20):
            client.put_object(Bucket="trainops", Key=f"k/{index}", Body=b"v%d" % index)
        client.put_object(Bucket="trainops", Key="k/0", Body=b"overwritten")
        client.delete_object(Bucket="trainops", Key="k/1")
        pid = server.pid
    finally:
        server.stop()
    assert pid is not None and not _alive(pid)
    again = S3Server(home, TOKEN)
    again.start()
    try:
        client = _client(again)
        listed = client.list_objects_v2(Bucket="trainops", Prefix="k/")["Contents"]
        assert sorted(item["Key"] for item in listed) == sorted(
            f"k/{index}" for index in range(20) if index != 1
        )
        assert client.get_object(Bucket="trainops", Key="k/0")["Body"].read() == b"overwritten"
        assert client.get_object(Bucket="trainops", Key="k/19")["Body"].read() == b"v19"
    finally:
        again.stop()


def test_syncing_a_tree_leaves_fifos_sockets_and_links_alone(tmp_path: Path) -> None:
    """A FIFO is not opened for a blocking read, a link is not followed, a socket is skipped."""
    tree = tmp_path / "data"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "file").write_bytes(b"x")
    os.mkfifo(tree / "fifo")
    (tree / "link").symlink_to("/dev/zero")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(tree / "sock"))
        sync_tree(tree)
    assert (tree / "sub" / "file").read_bytes() == b"x"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.s3
def test_a_seaweedfs_that_fails_to_start_says_why_with_its_log(tmp_path: Path) -> None:
    require("weed")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        server = S3Server(tmp_path / "home", TOKEN, port=port, ready_timeout=60)
        with pytest.raises(S3ServerError) as caught:
            server.start()
        server.stop()
    first, *tail = str(caught.value).splitlines()
    assert first.startswith("SeaweedFS failed to start: weed exited")
    assert "address already in use" in first
    assert str(server.log_path) in first
    assert tail and not any(line.startswith("goroutine ") for line in tail)
    assert not (tmp_path / "home" / CLIENT_FILE).exists()


def test_a_bad_bucket_name_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(S3ServerError, match="not a valid bucket name"):
        S3Server(tmp_path, TOKEN, bucket="../Etc")


def test_s3_serve_and_a_named_endpoint_together_are_refused(tmp_path: Path) -> None:
    env = {
        "TRAINOPS_HOME": str(tmp_path),
        "TRAINOPS_S3_SERVE": "1",
        "AWS_ENDPOINT_URL_S3": "http://minio:9000",
    }
    with pytest.raises(ConfigError, match="keep one of them"):
        Settings.load(env)
    (tmp_path / "config.yaml").write_text("s3:\n  serve: true\n  default_bucket: data\n")
    settings = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    assert settings.s3.serve
    assert settings.default_output_uri == "s3://data/jobs"


def test_clients_pick_up_a_live_servers_s3_and_ignore_a_dead_ones(tmp_path: Path) -> None:
    record = {
        "pid": os.getpid(),
        "endpoint_url": "http://127.0.0.1:1",
        "region": "us-east-1",
        "access_key_id": "TOS3KEY",
        "secret_access_key": "secret",
        "default_bucket": "trainops",
    }
    (tmp_path / "s3").mkdir()
    (tmp_path / CLIENT_FILE).write_text(json.dumps(record))
    settings = Settings.load({"TRAINOPS_HOME": str(tmp_path)})
    assert settings.s3.endpoint_url == "http://127.0.0.1:1"
    assert settings.default_output_uri == "s3://trainops/jobs"
    # A configured endpoint wins over the file.
    named = Settings.load({"TRAINOPS_HOME": str(tmp_path), "AWS_ENDPOINT_URL_S3": "http://x:1"})
    assert named.s3.endpoint_url == "http://x:1"
    (tmp_path / CLIENT_FILE).write_text(json.dumps({**record, "pid": 2**22 + 12345}))
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).s3.endpoint_url is None
    (tmp_path / CLIENT_FILE).write_text("{not json")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).s3.endpoint_url is None


@pytest.mark.slow
@pytest.mark.s3
def test_a_port_taken_before_weed_binds_it_is_chosen_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ports are chosen free and weed binds them a moment later: another process can take one
    in between (CI saw it once). The S3 port the user did not name is then chosen again."""
    require("weed")
    from trainops.storage import _seaweed

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        held = taken.getsockname()[1]
        monkeypatch.setattr(_seaweed, "_same_port_as_before", lambda record: held)
        server = S3Server(tmp_path / "home", TOKEN, ready_timeout=60)
        try:
            server.start()
            assert server.settings.endpoint_url != f"http://127.0.0.1:{held}"
            assert _client(server).list_objects_v2(Bucket="trainops")["KeyCount"] == 0
            client_file = json.loads((tmp_path / "home" / CLIENT_FILE).read_text())
            assert client_file["endpoint_url"] == server.settings.endpoint_url
            record = (tmp_path / "home" / "s3" / "port").read_text()
            assert server.settings.endpoint_url.endswith(f":{record}")
        finally:
            server.stop()
    assert "address already in use" in server.log_path.read_text()
