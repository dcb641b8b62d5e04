"""Running the server: ``serve`` as a real process, ``EmbeddedServer``, and ``server.json``."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.control._harness import fake_backend, wait_for
from trainops._errors import ConfigError, ServerError, TrainopsError
from trainops._settings import Settings
from trainops.server import EmbeddedServer, HomeInUseError, read_server_file, serve
from trainops.server._run import _banner
from trainops.server._server_file import HomeLock, advertise

SERVE = (
    "from trainops._settings import Settings; from trainops.server import serve; "
    "serve(Settings.load(), port={port})"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_refuses_other_machines_without_a_token(settings: Settings) -> None:
    with pytest.raises(TrainopsError, match="needs a token"):
        serve(settings, host="0.0.0.0", port=_free_port())
    assert not settings.server_file.exists()


def test_the_backend_is_chosen_by_name_and_a_wrong_name_touches_nothing(
    settings: Settings,
) -> None:
    unknown = dataclasses.replace(settings, backend="slurm")
    with pytest.raises(ConfigError, match=r"unknown backend 'slurm' \(known: local, ray\)"):
        EmbeddedServer(unknown, port=0).start()
    assert not settings.db_path.exists() and not settings.server_file.exists()
    with EmbeddedServer(settings, port=0) as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        info = httpx.get(f"{server.url}/api/v1/info", headers=headers).json()
        assert info["backend"] == "local"
    cli = subprocess.run(
        [sys.executable, "-m", "trainops.cli", "server", "--backend", "nope", "--port", "0"],
        env={**os.environ, "TRAINOPS_HOME": str(settings.home / "other")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 2 and "unknown backend 'nope' (known: local, ray)" in cli.stderr, (
        cli.stderr
    )
    assert not (settings.home / "other" / "trainops.db").exists()


def test_serve_reports_a_port_in_use(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(ServerError, match=r"cannot listen on 127\.0\.0\.1"):
            serve(settings, port=taken.getsockname()[1])


@pytest.mark.slow
def test_serve_runs_until_sigterm_and_withdraws_its_file(settings: Settings) -> None:
    port = _free_port()
    env = {**os.environ, "TRAINOPS_HOME": str(settings.home)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE.format(port=port)], env=env, stderr=subprocess.PIPE
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: read_server_file(settings), 30, "server.json")
        assert read_server_file(settings) == {"url": url, "pid": proc.pid}
        assert httpx.get(f"{url}/api/v1/health").json()["status"] == "ok"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"serving on {url}" in err.decode()
    assert not settings.server_file.exists()


def test_embedded_server_advertises_itself_while_it_runs(settings: Settings) -> None:
    with EmbeddedServer(settings, backend=fake_backend(settings)) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert read_server_file(settings) == {"url": server.url, "pid": os.getpid()}
        assert httpx.get(f"{server.url}/api/v1/health").status_code == 200
        with pytest.raises(HomeInUseError, match=f"already serves .* at {server.url}$"):
            EmbeddedServer(settings).start()
    assert not settings.server_file.exists()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.url}/api/v1/health")


def test_a_stale_server_file_is_replaced(settings: Settings, tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    stale = {"url": "http://127.0.0.1:9", "pid": int(dead.stdout)}
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.server_file.write_text(json.dumps(stale))
    with EmbeddedServer(settings, backend=fake_backend(settings)) as server:
        assert read_server_file(settings) == {"url": server.url, "pid": os.getpid()}
    # A file that is no longer ours is left alone.
    settings.server_file.write_text(json.dumps(stale))
    with EmbeddedServer(settings, backend=fake_backend(settings)):
        settings.server_file.write_text(json.dumps(stale))
    assert read_server_file(settings) == stale


def _serve_process(home: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TRAINOPS_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "trainops.cli", "server", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_two_servers_started_at_once_on_a_fresh_home_one_serves(settings: Settings) -> None:
    """The home lock: the loser says who serves the home, in one line, and exits non-zero."""
    for _round in range(2):
        ports = [_free_port(), _free_port()]
        procs = [_serve_process(settings.home, port) for port in ports]
        try:
            loser = wait_for(
                lambda ps=procs: next((p for p in ps if p.poll() is not None), None), 60
            )
            winner = procs[1 - procs.index(loser)]
            url = f"http://127.0.0.1:{ports[procs.index(winner)]}"
            _out, err = loser.communicate(timeout=30)
            assert loser.returncode != 0
            assert err.decode().strip().splitlines() == [
                f"trainops: error: a trainops server already serves {settings.home} at {url}"
            ]
            assert winner.poll() is None
            assert httpx.get(f"{url}/api/v1/health", timeout=10).status_code == 200
            assert read_server_file(settings) == {"url": url, "pid": winner.pid}
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=30)
        assert not settings.server_file.exists()


def test_a_second_embedded_server_waits_for_the_first_to_advertise(settings: Settings) -> None:
    """A server that loses the lock to one still starting reports the URL once it is known."""
    holder = HomeLock(settings)
    holder.acquire()
    try:
        timer = threading.Timer(0.3, advertise, (settings, "http://127.0.0.1:9"))
        timer.start()
        with pytest.raises(HomeInUseError) as caught:
            EmbeddedServer(settings).start()
        timer.join()
        assert caught.value.url == "http://127.0.0.1:9"
    finally:
        holder.release()
    assert not (settings.home / "trainops.db").exists()  # the loser never opened the store


def test_the_banner_of_a_wildcard_bind_names_both_addresses(settings: Settings) -> None:
    # Binding 0.0.0.0 in a test would expose it beyond loopback: the banner is built from the
    # addresses a started server records, set here as `serve(host="0.0.0.0")` would set them.
    server = EmbeddedServer(settings, host="0.0.0.0", port=8470)
    server.bind_url, server.url = "http://0.0.0.0:8470", "http://127.0.0.1:8470"
    banner = _banner(server)
    assert banner.startswith("trainops 0.1.0 serving on http://0.0.0.0:8470 (all interfaces; ")
    assert "local clients and agents use http://127.0.0.1:8470)" in banner
    assert f"API token in {settings.home / 'token'}" in banner
    configured = EmbeddedServer(Settings(home=settings.home, token="t"))
    configured.bind_url = configured.url = "http://127.0.0.1:8470"
    assert _banner(configured).endswith(
        "API token the configured one (TRAINOPS_TOKEN or token: in config.yaml))"
    )
    with EmbeddedServer(settings, backend=fake_backend(settings)) as local:
        assert _banner(local).startswith(f"trainops 0.1.0 serving on {local.url} (home ")
        assert local.bind_url == local.url
