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


class _Canned:
    """A loopback server that answers every connection with fixed bytes, then closes it."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self.requests.append(conn.recv(65536))
                conn.sendall(self.answer)

    def close(self) -> None:
        self.listener.close()


def _canned(answer: bytes) -> tuple[_Canned, HttpTransport]:
    server = _Canned(answer)
    return server, HttpTransport(server.url, {}, 5.0)


def test_a_chunked_answer_is_read_whole() -> None:
    server, http = _canned(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;ext=1\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n'
    )
    assert http.request("GET", "/c").json() == {"a": 1}
    http.close()
    server.close()


def test_an_answer_without_length_ends_with_the_connection() -> None:
    server, http = _canned(b"HTTP/1.0 404 Not Found\r\n\r\nno such thing")
    response = http.request("GET", "/n")
    assert (response.status, response.reason, response.text) == (404, "Not Found", "no such thing")
    assert response.will_close
    server.close()


def test_the_request_is_well_formed_http() -> None:
    server, http = _canned(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert http.request("POST", "/p", params=[("q", "a b")], raw=b"{}").status == 204
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /p?q=a+b HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.url.rsplit(':', 1)[1]}".encode() in lines
    assert b"Content-Length: 2" in lines and body == b"{}"
    http.close()
    server.close()


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (b"garbage\r\n\r\n", "malformed status line"),
        (b"SPDY/3 200 OK\r\n\r\n", "not an HTTP/1.x response"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "5 bytes early"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", "longer than 64 KiB"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 300 + b"\r\n", "more than 200 header lines"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk"),
        (b"", "closed the connection without answering"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999\r\n\r\n", "larger than"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n",
            "larger than",
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\n" * 3000, "more than 10 interim"),
    ],
)
def test_a_broken_or_hostile_answer_is_a_clear_error(answer: bytes, problem: str) -> None:
    server, http = _canned(answer)
    with pytest.raises(TransportError, match=problem):
        http.request("GET", "/x")
    http.close()
    server.close()


@pytest.mark.parametrize(
    "headers",
    [{"X-Evil": "a\r\nInjected: 1"}, {"Bad Name": "v"}, {"X": "nul\0"}, {"X": "t\u00f6ken\u2603"}],
)
def test_headers_that_would_break_the_request_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        HttpTransport("http://127.0.0.1:9", headers, 1.0)


def test_a_request_target_with_line_breaks_is_refused(opened: list[HttpTransport]) -> None:
    http = _open(opened, "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="white space"):
        http.request("GET", "/a b\r\nX: y")
