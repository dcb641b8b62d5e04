"""The shared keep-alive transport against real loopback HTTP servers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainops._transport import HttpTransport, TransportError


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: list[int] = []
    bodies: list[bytes] = []
    drop_idle = False

    def setup(self) -> None:
        # Counted when the connection is accepted, before any request on it is answered, so
        # the count is settled by the time the client sees a response (no race with the test).
        super().setup()
        type(self).connections.append(len(type(self).connections))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        type(self).bodies.append(self.rfile.read(length))
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def _answer(self) -> None:
        data = json.dumps({"path": self.path, "conn": type(self).connections[-1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        # Keep-alive was promised, but the server drops the idle connection anyway (as servers
        # do after their keep-alive timeout): the client only learns of it on the next request.
        self.close_connection = type(self).drop_idle

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    _Handler.connections, _Handler.bodies, _Handler.drop_idle = [], [], False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def opened() -> Iterator[list[HttpTransport]]:
    transports: list[HttpTransport] = []
    yield transports
    for transport in transports:
        transport.close()


def _open(opened: list[HttpTransport], url: str) -> HttpTransport:
    opened.append(HttpTransport(url, {"X-Test": "1"}, 5.0))
    return opened[-1]


def _url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/base"


def test_one_connection_is_kept_for_many_requests(
    server: ThreadingHTTPServer, opened: list[HttpTransport]
) -> None:
    http = _open(opened, _url(server))
    paths = [http.request("GET", "/x", params=[("a", i)]).json()["path"] for i in range(3)]
    assert paths == ["/base/x?a=0", "/base/x?a=1", "/base/x?a=2"]
    assert len(set(_Handler.connections)) == 1


def test_a_connection_the_server_dropped_while_idle_is_replaced_once(
    server: ThreadingHTTPServer, opened: list[HttpTransport]
) -> None:
    _Handler.drop_idle = True
    http = _open(opened, _url(server))
    for _ in range(3):
        assert http.request("POST", "/e", raw=b'{"n": 1}').ok
    assert _Handler.bodies == [b'{"n": 1}'] * 3
    assert len(_Handler.connections) == 3


def test_json_body_and_headers_are_sent(
    server: ThreadingHTTPServer, opened: list[HttpTransport]
) -> None:
    http = _open(opened, _url(server))
    assert http.request("POST", "/e", body={"k": [1, 2]}).ok
    assert json.loads(_Handler.bodies[0]) == {"k": [1, 2]}


def test_a_server_that_is_down_fails_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = HttpTransport(f"http://127.0.0.1:{port}", {}, 5.0)
    with pytest.raises(TransportError):
        http.request("GET", "/health")
    http.close()


def test_rebase_moves_to_another_server(
    server: ThreadingHTTPServer, opened: list[HttpTransport]
) -> None:
    http = _open(opened, "http://127.0.0.1:9")
    http.rebase(_url(server) + "/")
    assert http.base_url == _url(server)
    assert http.request("GET", "/y").json()["path"] == "/base/y"


@pytest.mark.parametrize("url", ["ftp://host/", "127.0.0.1:80", "http://"])
def test_urls_that_are_not_http_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        HttpTransport(url, {}, 1.0)
