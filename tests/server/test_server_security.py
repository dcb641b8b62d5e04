"""The server's walls against other sites and other users: Host/Origin checks and the API token.

The DNS-rebinding attack: a page on an attacker's domain, rebound to 127.0.0.1, sends requests
whose Host (and Origin) is the attacker's name. They must be refused before any route runs, and
without the home's token nothing but ``/health`` answers.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.control._harness import ControlPlane, control_plane, job_spec
from trainops._errors import ConfigError
from trainops._home import home_token, same_server, token_for
from trainops._settings import Settings
from trainops.client import Client
from trainops.server import EmbeddedServer
from trainops.server._guard import allowed_host_names, host_name
from trainops.server._settings import ServerSettings

API = "/api/v1"
ATTACKER = "rebind.attacker.example"


def _detail(response: httpx.Response) -> dict[str, Any]:
    detail: dict[str, Any] = response.json()["detail"]
    return detail


def _attack_body(plane: ControlPlane) -> dict[str, Any]:
    """What the attacker's page posts: a job whose environment makes Python run a command."""
    env = {"PYTHONINSPECT": "1", "PYTHONSTARTUP": "/tmp/payload.py", "FAKE_LINES": "0"}
    return {"job_name": "pwned", "spec": job_spec(env), "code_uri": plane.code_uri}


def test_a_dns_rebinding_page_can_neither_list_nor_submit(plane: ControlPlane) -> None:
    url = plane.server.url
    # What a browser sends after the attacker's name was rebound to 127.0.0.1: its own Host, its
    # own Origin, and no token (it cannot read the home's token file).
    forged = {"Host": f"{ATTACKER}:{url.rsplit(':', 1)[1]}", "Origin": f"http://{ATTACKER}"}
    with httpx.Client(base_url=url, headers=forged, timeout=30) as browser:
        listed = browser.get(f"{API}/jobs")
        posted = browser.post(f"{API}/jobs", json=_attack_body(plane))
    for answer in (listed, posted):
        assert answer.status_code == 403, answer.text
        assert _detail(answer)["error"] == "forbidden"
        assert ATTACKER in _detail(answer)["message"]
    assert plane.client.get(f"{API}/jobs/pwned").status_code == 404


def test_a_forged_host_is_refused_on_every_route(plane: ControlPlane) -> None:
    token = plane.client.headers["Authorization"]
    headers = {"Host": ATTACKER, "Authorization": token}
    with httpx.Client(base_url=plane.server.url, headers=headers, timeout=30) as forged:
        for path in (f"{API}/health", f"{API}/info", f"{API}/jobs", "/openapi.json", "/docs"):
            assert forged.get(path).status_code == 403, path
        agent = forged.get("/agent/v1/jobs/x/hosts/algo-1/assignment", params={"attempt": 1})
        assert agent.status_code == 403
        # Even with the right token: the Host check is its own wall.
        assert forged.post(f"{API}/jobs", json=_attack_body(plane)).status_code == 403
    assert plane.client.get(f"{API}/jobs/pwned").status_code == 404


def test_a_cross_origin_request_is_refused_and_the_own_origin_is_not(plane: ControlPlane) -> None:
    own = plane.server.url
    for origin, status in ((f"http://{ATTACKER}", 403), ("null", 403), (own, 200)):
        answer = plane.client.get(f"{API}/jobs", headers={"Origin": origin})
        assert answer.status_code == status, (origin, answer.text)
    refused = plane.client.post(
        f"{API}/jobs", json=_attack_body(plane), headers={"Origin": "http://localhost:3000"}
    )
    assert refused.status_code == 403 and "Origin" in _detail(refused)["message"]


def test_loopback_names_are_accepted(plane: ControlPlane) -> None:
    port = plane.server.url.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert plane.client.get(f"{API}/jobs", headers={"Host": host}).status_code == 200, host


def test_the_api_needs_the_home_token_but_health_does_not(plane: ControlPlane) -> None:
    url = plane.server.url
    assert httpx.get(f"{url}{API}/health").status_code == 200
    for path in (f"{API}/info", f"{API}/jobs", f"{API}/jobs/any"):
        answer = httpx.get(f"{url}{path}")
        assert answer.status_code == 401, path
        assert _detail(answer)["error"] == "unauthorized"
        assert "TRAINOPS_HOME/token" in _detail(answer)["message"]
    assert httpx.post(f"{url}{API}/jobs", json=_attack_body(plane)).status_code == 401
    token = home_token(plane.server.settings.home)
    assert token is not None and plane.server.token == token
    assert token not in plane.client.get(f"{API}/jobs").text


def test_the_home_token_is_private_and_lasts(settings: Settings) -> None:
    assert home_token(settings.home) is None
    with control_plane(settings) as first:
        token = first.server.token
    path = settings.home / "token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_uid == os.getuid()
    with control_plane(settings) as second:
        assert second.server.token == token
        assert second.client.get(f"{API}/jobs").status_code == 200


def test_a_configured_token_replaces_the_home_token(settings: Settings) -> None:
    guarded = Settings(home=settings.home, capacity=settings.capacity, token="configured-token")
    with control_plane(guarded) as plane:
        assert plane.server.token == "configured-token"
        home = home_token(settings.home, create=True)
        answer = httpx.get(
            f"{plane.server.url}{API}/jobs", headers={"Authorization": f"Bearer {home}"}
        )
        assert answer.status_code == 401


def test_a_client_without_the_token_is_told_where_it_is(plane: ControlPlane) -> None:
    with Client(plane.server.url) as client, pytest.raises(Exception, match="token") as caught:
        client.list_jobs()
    assert "TRAINOPS_TOKEN" in str(caught.value)


def test_allowed_hosts_admit_more_names(settings: Settings) -> None:
    configured = Settings(
        home=settings.home,
        capacity=settings.capacity,
        server=ServerSettings(allowed_hosts=("trainops.internal",)),
    )
    with control_plane(configured) as plane:
        ok = plane.client.get(f"{API}/jobs", headers={"Host": "trainops.internal:8470"})
        assert ok.status_code == 200
        assert plane.client.get(f"{API}/jobs", headers={"Host": ATTACKER}).status_code == 403


def test_allowed_hosts_and_host_header_parsing() -> None:
    assert host_name("[::1]:8470") == "::1"
    assert host_name("Example.COM:80") == "example.com"
    assert host_name("127.0.0.1") == "127.0.0.1"
    assert host_name("[::1") == ""
    loopback = allowed_host_names("127.0.0.1")
    assert {"127.0.0.1", "localhost", "::1"} <= loopback and ATTACKER not in loopback
    assert "10.1.2.3" in allowed_host_names("10.1.2.3")
    everywhere = allowed_host_names("0.0.0.0", ["Build.Example"])
    assert "build.example" in everywhere and "127.0.0.1" in everywhere


def test_the_home_token_goes_only_to_the_home_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    token = home_token(home, create=True)
    assert token is not None and home_token(home, create=True) == token
    (home / "server.json").write_text('{"url": "http://127.0.0.1:8470", "pid": 1}')
    assert token_for("http://localhost:8470", home, None) == token
    assert token_for("http://[::1]:8470/", home, None) == token
    assert token_for("http://127.0.0.2:8470", home, None) == token
    assert token_for("http://127.0.0.1:8471", home, None) is None
    assert token_for("http://127.evil.example:8470", home, None) is None
    assert token_for("http://other.example:8470", home, None) is None
    assert token_for("http://other.example:8470", home, "mine") == "mine"
    assert same_server("http://127.0.0.1:8470", "http://127.0.0.1:8470")
    assert not same_server("http://127.0.0.1:notaport", "http://127.0.0.1:8470")


def test_allowed_hosts_come_from_the_environment_or_config_yaml(tmp_path: Path) -> None:
    env = {"TRAINOPS_HOME": str(tmp_path), "TRAINOPS_ALLOWED_HOSTS": "a.example, b.example,"}
    assert Settings.load(env).allowed_hosts == ("a.example", "b.example")
    (tmp_path / "config.yaml").write_text("allowed_hosts: [c.example]\n")
    assert Settings.load({"TRAINOPS_HOME": str(tmp_path)}).allowed_hosts == ("c.example",)
    (tmp_path / "config.yaml").write_text("allowed_hosts: {x: 1}\n")
    with pytest.raises(ConfigError, match="allowed_hosts"):
        Settings.load({"TRAINOPS_HOME": str(tmp_path)})


def test_a_server_refuses_an_empty_or_shared_token_file(settings: Settings) -> None:
    path = settings.home / "token"
    settings.home.mkdir(parents=True, exist_ok=True)
    path.write_text("\n")
    with pytest.raises(ConfigError, match="holds no API token"):
        EmbeddedServer(settings).start()
    path.unlink()
    token = home_token(settings.home, create=True)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="must be private"):
        EmbeddedServer(settings).start()
    assert home_token(settings.home) == token  # clients still read it; only servers refuse it
    assert not settings.server_file.exists()
