"""A small keep-alive HTTP/1.1 transport over the standard library's ``http.client``.

The CLI pays for every import on every command; httpx alone costs more than a whole warm request
round trip, so the client speaks HTTP through this instead. One connection is reused and
re-opened once if the server closed it between requests.
"""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

__all__ = ["HttpResponse", "HttpTransport", "TransportError", "TransportTimeout"]


class TransportError(Exception):
    """The request did not get an answer (refused, reset, DNS)."""


class TransportTimeout(TransportError):
    """The server did not answer within the timeout."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    reason: str
    body: bytes

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
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base_url!r} is not an http:// or https:// URL")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Accept": "application/json", "Connection": "keep-alive", **headers}
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: list[tuple[str, Any]] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> HttpResponse:
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        payload = None if body is None else json.dumps(body).encode()
        headers = dict(self._headers)
        if payload is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                return self._send(method, target, payload, headers, timeout)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                if attempt == 2:
                    raise TransportError(str(exc) or type(exc).__name__) from None
            except TimeoutError:
                raise TransportTimeout("timed out") from None
            except (OSError, http.client.HTTPException) as exc:
                raise TransportError(str(exc) or type(exc).__name__) from None
        raise AssertionError("unreachable")

    def _send(
        self,
        method: str,
        target: str,
        payload: bytes | None,
        headers: dict[str, str],
        timeout: float | None,
    ) -> HttpResponse:
        try:
            conn = self._connection(timeout)
            conn.request(method, target, body=payload, headers=headers)
            reply = conn.getresponse()
            return HttpResponse(reply.status, reply.reason, reply.read())
        except BaseException:
            # Whatever interrupted the exchange (an error, Ctrl-C during a long-poll) leaves the
            # connection mid-response: drop it so the next request starts clean.
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
        conn = self._conn
        if conn.sock is None:
            # New, or closed by a "Connection: close" answer: (re)connect before setting options.
            conn.connect()
        sock: socket.socket = conn.sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout if timeout is not None else self._timeout)
        return conn
