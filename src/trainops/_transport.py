"""The one keep-alive HTTP/1.1 transport, on a socket of its own.

Both the CLI/SDK client and the host agent speak HTTP through this. Every command and every agent
pays for its imports: httpx alone costs more than a whole warm request round trip, and the
standard library's ``http.client`` drags in the ``email`` package (half of a command's imports)
to parse a few headers. So this speaks the small part of HTTP/1.1 the trainops APIs use itself:
a request with a ``Content-Length`` body, and a response framed by ``Content-Length``, chunked
transfer coding or the end of the connection; TLS (``ssl``, imported only then) for https URLs.

One connection is kept open per transport. When a *reused* connection turns out to have been
closed by the server while it sat idle, the request is sent once more on a fresh connection; a
fresh connection that fails is reported at once (the server is down, retrying only hides it).
Callers must only send requests that are safe to repeat that way (every call of trainops' APIs
is: agent events carry sequence numbers, submissions carry the job name).

A response is bounded: at most :data:`MAX_HEADER_LINES` header lines of :data:`MAX_LINE` bytes
each, at most :data:`MAX_INTERIM` interim (1xx) answers and a body of at most :data:`MAX_BODY`
bytes however it is framed, so a hostile or broken server cannot make a client buffer without end.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlencode, urlsplit

__all__ = ["HttpResponse", "HttpTransport", "TransportError", "TransportTimeout"]

MAX_LINE = 65536
MAX_HEADER_LINES = 200
MAX_BODY = 64 * 1024 * 1024  # a log page is at most 8 MiB; nothing trainops serves comes near
MAX_INTERIM = 10  # 1xx answers before the real one
_NO_BODY = frozenset({204, 304})


class TransportError(Exception):
    """The request did not get an answer (refused, reset, DNS, a malformed response)."""


class TransportTimeout(TransportError):
    """The server did not answer within the timeout."""


class _Stale(TransportError):
    """The server closed the connection before answering (as an idle keep-alive one)."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    reason: str
    body: bytes
    will_close: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class HttpTransport:
    """Requests against one base URL; ``headers`` go on every request."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float) -> None:
        for name, value in headers.items():
            _check_header(name, value)
        self._headers = {"Accept": "application/json", "Connection": "keep-alive", **headers}
        self._timeout = timeout
        self._sock: socket.socket | None = None
        self._reader: IO[bytes] | None = None
        self.base_url = ""
        self.rebase(base_url)

    def rebase(self, base_url: str) -> None:
        """Send the next requests to ``base_url`` (a server that moved); raises ``ValueError``."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http:// or https:// URL")
        self.close()
        self.base_url = base_url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        default = 443 if self._https else 80
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if self._port == default else f"{host}:{self._port}"

    def request(
        self,
        method: str,
        path: str,
        *,
        params: list[tuple[str, Any]] | None = None,
        body: Any = None,
        raw: bytes | None = None,
        timeout: float | None = None,
    ) -> HttpResponse:
        """Send one request; ``body`` is sent as JSON, ``raw`` as ready JSON bytes."""
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        if any(c in target for c in "\r\n \0"):
            raise ValueError(f"a request target cannot hold white space or NUL: {target!r}")
        payload = raw if raw is not None else None if body is None else json.dumps(body).encode()
        head = self._head(method, target, payload)
        reused = self._sock is not None
        try:
            return self._exchange(head, payload, method, timeout)
        except _Stale as exc:
            if not reused:
                raise TransportError(str(exc)) from None
        except TimeoutError:
            raise TransportTimeout("timed out") from None
        except OSError as exc:
            if not (reused and isinstance(exc, BrokenPipeError | ConnectionResetError)):
                raise TransportError(str(exc) or type(exc).__name__) from None
        # The server closed the idle keep-alive connection: once more on a fresh one.
        try:
            return self._exchange(head, payload, method, timeout)
        except TimeoutError:
            raise TransportTimeout("timed out") from None
        except OSError as exc:
            raise TransportError(str(exc) or type(exc).__name__) from None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _head(self, method: str, target: str, payload: bytes | None) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        lines += [f"{name}: {value}" for name, value in self._headers.items()]
        if payload is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        elif method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: 0")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _exchange(
        self, head: bytes, payload: bytes | None, method: str, timeout: float | None
    ) -> HttpResponse:
        try:
            sock, reader = self._connection(timeout)
            sock.sendall(head + payload if payload else head)
            response = _read_response(reader, method)
        except BaseException:
            # Whatever interrupted the exchange (an error, Ctrl-C during a long-poll) leaves the
            # connection mid-response: drop it so the next request starts clean.
            self.close()
            raise
        if response.will_close:
            self.close()
        return response

    def _connection(self, timeout: float | None) -> tuple[socket.socket, IO[bytes]]:
        if self._sock is None or self._reader is None:
            sock = socket.create_connection((self._host, self._port), timeout=self._timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._https:
                import ssl  # only for https servers: it costs milliseconds to import

                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self._host)
            self._sock, self._reader = sock, sock.makefile("rb")
        self._sock.settimeout(timeout if timeout is not None else self._timeout)
        return self._sock, self._reader


def _check_header(name: str, value: str) -> None:
    bad = not name or any(c in name for c in ":\r\n \0") or any(c in value for c in "\r\n\0")
    try:
        (name + value).encode("latin-1")
    except UnicodeEncodeError:
        bad = True
    if bad:
        raise ValueError(f"HTTP header {name!r} has a character a header cannot hold")


def _line(reader: IO[bytes]) -> bytes:
    line = reader.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise TransportError("the server sent a line longer than 64 KiB")
    return line


def _read_response(reader: IO[bytes], method: str) -> HttpResponse:
    for _ in range(MAX_INTERIM + 1):
        response = _read_one(reader, method)
        if response is not None:
            return response
    raise TransportError(f"the server sent more than {MAX_INTERIM} interim (1xx) answers")


def _read_one(reader: IO[bytes], method: str) -> HttpResponse | None:
    """One answer; ``None`` for an interim (1xx) one, after which the real one follows."""
    status_line = _line(reader)
    if not status_line:
        raise _Stale("the server closed the connection without answering")
    try:
        version, code, *reason = status_line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        status = int(code)
    except ValueError:
        raise TransportError(f"malformed status line {status_line[:80]!r}") from None
    if not version.startswith("HTTP/1."):
        raise TransportError(f"not an HTTP/1.x response: {status_line[:80]!r}")
    headers = _read_headers(reader)
    if 100 <= status < 200:
        return None
    connection = headers.get("connection", "").lower()
    will_close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
    if method == "HEAD" or status in _NO_BODY:
        body = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        body = _read_chunked(reader)
    elif "content-length" in headers:
        body = _read_exactly(reader, _length(headers["content-length"]))
    else:
        body, will_close = _read_to_close(reader), True
    return HttpResponse(status, reason[0] if reason else "", body, will_close)


def _read_headers(reader: IO[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        line = _line(reader)
        if line in (b"\r\n", b"\n", b""):
            return headers
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise TransportError(f"malformed header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    raise TransportError(f"the server sent more than {MAX_HEADER_LINES} header lines")


def _length(text: str) -> int:
    if not text.isdigit():
        raise TransportError(f"malformed Content-Length {text[:40]!r}")
    return int(text)


def _too_big(size: int) -> TransportError:
    return TransportError(f"the server's answer is larger than {MAX_BODY} bytes ({size})")


def _read_to_close(reader: IO[bytes]) -> bytes:
    data = reader.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise _too_big(len(data))
    return data


def _read_exactly(reader: IO[bytes], size: int) -> bytes:
    if size > MAX_BODY:
        raise _too_big(size)
    data = reader.read(size)
    if len(data) < size:
        raise TransportError(f"the server closed the connection {size - len(data)} bytes early")
    return data


def _read_chunked(reader: IO[bytes]) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_text = _line(reader).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise TransportError(f"malformed chunk size {size_text[:40]!r}") from None
        if size == 0:
            _read_headers(reader)  # trailers, if any, then the blank line
            return b"".join(parts)
        total += size
        if total > MAX_BODY:
            raise _too_big(total)
        parts.append(_read_exactly(reader, size))
        _line(reader)  # the CRLF after the chunk
