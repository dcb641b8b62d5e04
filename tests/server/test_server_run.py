"""Running the server: ``serve`` as a real process, ``EmbeddedServer``, and ``server.json``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.control._harness import fake_backend, wait_for
from trainops._errors import ServerError, TrainopsError
from trainops._settings import Settings
from trainops.server import EmbeddedServer, read_server_file, serve

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
        with pytest.raises(ServerError, match="already running"):
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
