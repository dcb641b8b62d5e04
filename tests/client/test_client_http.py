"""The HTTP client against a real loopback server: requests it sends, errors it maps."""

from __future__ import annotations

import json
import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.client._scripted_api import ScriptedAPI
from trainops import JobNotFoundError, ServerError, SpecError
from trainops._settings import Settings
from trainops.client import Client, connect, running_server
from trainops.server._server_file import HomeLock, advertise

API = "/api/v1"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_token_is_sent_as_bearer_header_and_kept_out_of_repr(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/health")] = (200, {"status": "ok", "version": "0.1.0"})
    with Client(api.url, token="s3cret-token") as client:
        assert client.health() == {"status": "ok", "version": "0.1.0"}
        assert "s3cret" not in repr(client)
    assert api.requests[0].headers["authorization"] == "Bearer s3cret-token"


def test_no_authorization_header_without_token(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/info")] = (200, {"default_output_uri": "file:///x"})
    with Client(api.url) as client:
        assert client.info()["default_output_uri"] == "file:///x"
    assert "authorization" not in api.requests[0].headers


def test_list_jobs_sends_every_filter(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/jobs")] = (200, {"jobs": [{"TrainingJobName": "a"}]})
    after = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    with Client(api.url) as client:
        jobs = client.list_jobs(
            status=["Failed", "Stopped"], name_contains="dig", limit=7, created_after=after,
            created_before="2024-07-01T00:00:00Z",
        )  # fmt: skip
    assert jobs == [{"TrainingJobName": "a"}]
    assert sorted(api.requests[0].query) == [
        ("created_after", "2024-06-01T12:00:00+00:00"),
        ("created_before", "2024-07-01T00:00:00Z"),
        ("limit", "7"),
        ("name_contains", "dig"),
        ("status", "Failed"),
        ("status", "Stopped"),
    ]


def test_single_status_and_defaults(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/jobs")] = (200, {"jobs": []})
    with Client(api.url) as client:
        assert client.list_jobs(status="InProgress") == []
    assert sorted(api.requests[0].query) == [("limit", "50"), ("status", "InProgress")]


def test_logs_and_metrics_queries(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/jobs/j-1/logs")] = (200, {"lines": [], "next": 5})
    api.routes[("GET", f"{API}/jobs/j-1/metrics")] = (200, {"metrics": [{"MetricName": "loss"}]})
    with Client(api.url) as client:
        assert client.logs("j-1", after=3, host="algo-2", limit=10, wait=1)["next"] == 5
        assert client.metrics("j-1", "loss") == [{"MetricName": "loss"}]
    assert dict(api.requests[0].query) == {
        "after": "3",
        "host": "algo-2",
        "limit": "10",
        "wait": "1",
    }
    assert api.requests[1].query == [("name", "loss")]


def test_job_names_are_quoted_into_the_path(api: ScriptedAPI) -> None:
    with Client(api.url) as client, pytest.raises(JobNotFoundError):
        client.describe("a/../b c")
    assert api.requests[0].path == f"{API}/jobs/a%2F..%2Fb%20c"


def test_404_is_job_not_found_with_the_server_message(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/jobs/nope")] = (
        404,
        {"detail": {"error": "not_found", "message": "no job named 'nope'"}},
    )
    with Client(api.url) as client, pytest.raises(JobNotFoundError, match="no job named 'nope'"):
        client.describe("nope")


def test_422_is_a_spec_error_listing_the_problems(api: ScriptedAPI) -> None:
    problems = [["instance_type", "unknown instance type 'x'"], ["inputs.a b", "bad name"]]
    api.routes[("POST", f"{API}/jobs/j/stop")] = (
        422,
        {"detail": {"error": "invalid_spec", "message": "invalid", "problems": problems}},
    )
    with Client(api.url) as client, pytest.raises(SpecError) as caught:
        client.stop("j")
    assert caught.value.problems == [
        ("instance_type", "unknown instance type 'x'"),
        ("inputs.a b", "bad name"),
    ]
    assert "instance_type: unknown instance type 'x'" in str(caught.value)


def test_422_in_fastapi_shape_still_names_the_fields(api: ScriptedAPI) -> None:
    detail = [{"loc": ["body", "spec", "entry_point"], "msg": "Field required", "type": "missing"}]
    api.routes[("POST", f"{API}/jobs/j/stop")] = (422, {"detail": detail})
    with Client(api.url) as client, pytest.raises(SpecError) as caught:
        client.stop("j")
    assert caught.value.problems == [("spec.entry_point", "Field required")]


def test_409_is_a_server_error_with_the_message(api: ScriptedAPI) -> None:
    api.routes[("POST", f"{API}/jobs/j/stop")] = (
        409,
        {"detail": {"error": "conflict", "message": "job j has already ended (Completed)"}},
    )
    with (
        Client(api.url) as client,
        pytest.raises(ServerError, match=r"^job j has already ended \(Completed\)$"),
    ):
        client.stop("j")


def test_401_tells_how_to_pass_the_token(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/health")] = (
        401,
        {"detail": {"error": "unauthorized", "message": "missing or wrong token"}},
    )
    with Client(api.url, token="wrong") as client, pytest.raises(ServerError) as caught:
        client.health()
    assert "TRAINOPS_TOKEN" in str(caught.value)
    assert "wrong" not in str(caught.value).replace("missing or wrong token", "")


def test_500_without_json_is_a_server_error(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/health")] = (500, b"Internal Server Error")
    with Client(api.url) as client, pytest.raises(ServerError, match="500: Internal Server Error"):
        client.health()


def test_success_without_json_is_a_server_error(api: ScriptedAPI) -> None:
    api.routes[("GET", f"{API}/health")] = (200, b"<html>not the api</html>")
    with Client(api.url) as client, pytest.raises(ServerError, match="other than JSON"):
        client.health()


def test_connection_refused_names_the_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with Client(url) as client, pytest.raises(ServerError) as caught:
        client.health()
    assert str(caught.value).startswith(f"cannot reach trainops server at {url}: ")


def test_connect_to_a_configured_server(api: ScriptedAPI, tmp_path: Path) -> None:
    api.routes[("GET", f"{API}/health")] = (200, {"status": "ok", "version": "0.1.0"})
    with connect(Settings(home=tmp_path, server_url=api.url, token="t")) as client:
        assert not client.embedded
        assert client.health()["status"] == "ok"
    assert api.requests[0].headers["authorization"] == "Bearer t"


def test_connect_without_a_server_embeds_one(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    with connect(settings) as client:
        assert client.embedded
        assert client.url.startswith("http://127.0.0.1:")
        assert client.list_jobs() == []
        # Every command attaches to it rather than starting a second control plane.
        with connect(settings) as attached:
            assert not attached.embedded and attached.url == client.url
            assert attached.list_jobs() == []  # with the home's token, found on its own
    with Client(client.url) as after, pytest.raises(ServerError, match="cannot reach"):
        after.health()


def test_a_server_file_left_behind_is_not_attached_to(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    with connect(settings) as first:
        url = first.url
    # A server killed without a word leaves its server.json; nothing holds the home's lock.
    (tmp_path / "server.json").write_text(json.dumps({"url": url, "pid": os.getpid()}))
    assert running_server(settings) is None
    with connect(settings) as second:
        assert second.embedded


def test_connect_attaches_to_a_server_that_is_still_starting(
    api: ScriptedAPI, tmp_path: Path
) -> None:
    """The home's lock is taken but server.json not yet written: wait for it, then attach."""
    settings = Settings(home=tmp_path)
    api.routes[("GET", "/api/v1/health")] = (200, {"status": "ok", "version": "0.1.0"})
    starting = HomeLock(settings)
    starting.acquire()
    try:
        timer = threading.Timer(0.3, advertise, (settings, api.url))
        timer.start()
        with connect(settings) as client:
            assert not client.embedded and client.url == api.url
            assert client.health()["status"] == "ok"
        timer.join()
    finally:
        starting.release()
